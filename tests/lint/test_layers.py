"""The layers import one way, checked from the import graph of the source tree (not by running).

- the agent (inside the user's training process) imports nothing of ours outside `agent/` and
  `records.py`, and at module level nothing outside the standard library (torch and the
  trackers only late, inside functions, once the user imported them);
- `records.py` is standard library only (the agent imports it);
- the supervisor knows nothing of the command line (`cli/`);
- the engine is pure: it imports none of the parts that do I/O (supervisor, sources, views, cli).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
PKG = SRC / "trainmeter"


def module_name(path: Path, src: Path = SRC) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path, src: Path = SRC) -> list[tuple[str, bool]]:
    """(imported module, at module level?) for every import in the file, relative ones resolved."""
    tree = ast.parse(path.read_text(), filename=str(path))
    here = module_name(path, src)
    package = here if path.name == "__init__.py" else here.rsplit(".", 1)[0]
    top_level = {id(node) for node in tree.body}
    for node in tree.body:  # `if TYPE_CHECKING:` blocks never run
        if isinstance(node, ast.If):
            top_level.update(id(n) for n in node.body + node.orelse)
        if isinstance(node, ast.Try):
            top_level.update(id(n) for n in node.body)
    found: list[tuple[str, bool]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, id(node) in top_level) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            if node.module is None:  # `from . import x`: each x is a module
                found.extend((f"{name}.{alias.name}", id(node) in top_level) for alias in node.names)
            else:
                found.append((name, id(node) in top_level))
    return found


def files(sub: str) -> list[Path]:
    root = PKG / sub
    return sorted(root.rglob("*.py")) if root.is_dir() else [root]


def is_type_checking_only(path: Path, name: str) -> bool:
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for sub in ast.walk(node):
                if isinstance(sub, (ast.Import, ast.ImportFrom)):
                    names = [a.name for a in sub.names] + [getattr(sub, "module", None) or ""]
                    if any(name.endswith(n) for n in names if n):
                        return True
    return False


def test_the_agent_is_closed_over_itself_and_the_wire_schema() -> None:
    stdlib = set(sys.stdlib_module_names)
    bad = []
    for path in files("agent"):
        for name, top in imports(path):
            root = name.split(".")[0]
            if root == "trainmeter":
                if not (name.startswith("trainmeter.agent") or name == "trainmeter.records"):
                    bad.append(f"{path.relative_to(SRC)} imports {name}")
            elif top and root not in stdlib and not is_type_checking_only(path, name):
                bad.append(f"{path.relative_to(SRC)} imports {name} at module level")
    assert bad == []


def test_the_wire_schema_is_standard_library_only() -> None:
    """At module level; `redact_argv` loads `trainmeter.redact` late, on `tm`'s side only."""
    stdlib = set(sys.stdlib_module_names)
    found = imports(PKG / "records.py")
    top = [name for name, at_top in found if at_top]
    late = [name for name, at_top in found if not at_top]
    assert top and all(n.split(".")[0] in stdlib for n in top), top
    assert late == ["trainmeter.redact"]
    assert all(n.split(".")[0] in stdlib for n, _ in imports(PKG / "redact.py"))


def test_the_supervisor_knows_nothing_of_the_command_line() -> None:
    bad = [
        f"{path.relative_to(SRC)} imports {name}"
        for path in files("supervisor")
        for name, _top in imports(path)
        if name.startswith("trainmeter.cli")
    ]
    assert bad == []


def test_the_engine_imports_no_part_that_does_io() -> None:
    io_parts = ("trainmeter.supervisor", "trainmeter.sources", "trainmeter.views", "trainmeter.cli")
    bad = [
        f"{path.relative_to(SRC)} imports {name}"
        for path in files("engine")
        for name, _top in imports(path)
        if name.startswith(io_parts)
    ]
    assert bad == []


def test_the_checker_sees_a_forbidden_import(tmp_path: Path) -> None:
    """The graph reader resolves relative imports: a planted `from ..cli import args` is found."""
    fake = tmp_path / "trainmeter" / "supervisor" / "probe.py"
    fake.parent.mkdir(parents=True)
    fake.write_text("from ..cli import args\nfrom ..records import ENV_SOCKET\n")
    found = imports(fake, src=tmp_path)
    assert ("trainmeter.cli", True) in found and ("trainmeter.records", True) in found
