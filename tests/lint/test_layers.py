"""The layers import one way, checked from the import graph of the source tree (not by running).

- the agent (inside the user's training process) imports nothing of ours outside `agent/`,
  `records.py` and `payloads.py`, and at module level nothing outside the standard library
  (torch and the trackers only late, inside functions, once the user imported them);
- `records.py` and `payloads.py` are standard library only (the agent imports them), and
  `payloads.py` does not import `typing` when it runs (milliseconds of every process's start);
- the supervisor knows nothing of the command line (`cli/`);
- the engine is pure: it imports none of the parts that do I/O (supervisor, sources, views, cli);
- every package imports only its own layer and the layers below (`LAYERS`): the supervisor no
  view, exporter or command; `runlog/` (reading run directories) not the supervisor; the
  exporters no supervisor and no view;
- no module is imported by a name in a string (`importlib.import_module("trainmeter...")`),
  which the import graph could not see;
- the import graph of the modules (late imports included) has no circle.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable
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


#: The wire schema: the envelope and the table of record kinds, which the agent builds with.
WIRE = ("trainmeter.records", "trainmeter.payloads")


def test_the_agent_is_closed_over_itself_and_the_wire_schema() -> None:
    stdlib = set(sys.stdlib_module_names)
    bad = []
    for path in files("agent"):
        for name, top in imports(path):
            root = name.split(".")[0]
            if root == "trainmeter":
                if not (name.startswith("trainmeter.agent") or name in WIRE):
                    bad.append(f"{path.relative_to(SRC)} imports {name}")
            elif top and root not in stdlib and not is_type_checking_only(path, name):
                bad.append(f"{path.relative_to(SRC)} imports {name} at module level")
    assert bad == []


def test_the_wire_schema_is_standard_library_only() -> None:
    """At module level; `redact_argv` loads `trainmeter.redact` late, on `tm`'s side only."""
    stdlib = set(sys.stdlib_module_names)
    found = imports(PKG / "records.py")
    top = [name for name, at_top in found if at_top and name != "trainmeter.payloads"]
    late = [name for name, at_top in found if not at_top]
    assert top and all(n.split(".")[0] in stdlib for n in top), top
    # `json` late too: the agent encodes with its C parts (`_json`) and never needs the package
    assert [n for n in late if n.split(".")[0] not in stdlib] == ["trainmeter.redact"]
    # redact shows control characters with `visible` (standard library only itself)
    assert all(n.split(".")[0] in stdlib or n == "trainmeter.visible"
               for n, _ in imports(PKG / "redact.py"))
    assert all(n.split(".")[0] in stdlib for n, _ in imports(PKG / "visible.py"))
    tables = imports(PKG / "payloads.py")
    assert all(n.split(".")[0] in stdlib for n, _ in tables), tables
    assert [n for n, top in tables if top and not is_type_checking_only(PKG / "payloads.py", n)] in (
        [], ["__future__"]
    ), "payloads.py runs in every training process: it imports nothing when it runs"


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


#: The layers, lowest first: a module may import its own package and those on lower rows.
LAYERS: list[tuple[str, ...]] = [
    ("records", "payloads", "readable", "redact", "snapread", "visible", "plain"),  # stdlib only
    ("agent",),  # inside the user's process
    ("emit",),  # the user's `trainmeter.emit(...)`: the agent's public face
    ("hardware",),  # spec tables and measured peaks
    ("engine",),  # pure: records in, snapshot out
    ("sources",),  # samplers: GPU, host, node
    ("runlog",),  # run directories written and read back, the replay
    ("supervisor",),  # `tm` around the child
    ("exporters",),  # Prometheus, tables, W&B
    ("views",),  # terminal, web, passport, report
    ("cli",),  # the commands
]
RANK = {name: i for i, row in enumerate(LAYERS) for name in row}


def package_of(module: str) -> str | None:
    """`trainmeter.runlog.replay` -> `runlog`; the root package and `__main__` have none."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in RANK else None


def upward_imports(paths: Iterable[Path], src: Path = SRC) -> list[str]:
    bad = []
    for path in paths:
        here = package_of(module_name(path, src))
        if here is None:
            continue
        for name, _top in imports(path, src):
            there = package_of(name)
            if there is not None and RANK[there] > RANK[here]:
                bad.append(f"{path.relative_to(src)} ({here}) imports {name} ({there})")
    return bad


def test_every_layer_imports_only_itself_and_the_layers_below() -> None:
    assert set(RANK) >= {p.name for p in PKG.iterdir() if p.is_dir() and p.name[0].isalpha()} | {
        p.stem for p in PKG.glob("*.py") if not p.stem.startswith("__")
    }, "a new package needs its row in LAYERS"
    assert upward_imports(sorted(PKG.rglob("*.py"))) == []


def test_the_supervisor_imports_no_view_and_runlog_and_exporters_no_supervisor() -> None:
    """The three rules the issue names, spelled out (`LAYERS` implies them)."""
    rules = {
        "supervisor": ("trainmeter.views", "trainmeter.exporters", "trainmeter.cli"),
        "runlog": ("trainmeter.supervisor", "trainmeter.views", "trainmeter.exporters"),
        "exporters": ("trainmeter.supervisor", "trainmeter.views", "trainmeter.cli"),
    }
    bad = [
        f"{path.relative_to(SRC)} imports {name}"
        for sub, banned in rules.items()
        for path in files(sub)
        for name, _top in imports(path)
        if name.startswith(banned)
    ]
    assert bad == []


def imports_by_string(path: Path) -> list[str]:
    """`importlib.import_module("...")`, `__import__("...")` with a literal name: hidden edges."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        arg = node.args[0]
        if name in ("import_module", "__import__") and isinstance(arg, ast.Constant):
            found.append(f"{path.name}:{node.lineno} {name}({arg.value!r})")
    return found


def test_no_module_is_imported_by_a_name_in_a_string() -> None:
    assert [hit for path in sorted(PKG.rglob("*.py")) for hit in imports_by_string(path)] == []


def import_graph(src: Path = SRC) -> dict[str, set[str]]:
    """Module -> the modules of ours it imports (late ones too), names resolved to modules."""
    paths = {module_name(p, src): p for p in (src / "trainmeter").rglob("*.py")}

    def resolve(name: str) -> str | None:
        while name not in paths and "." in name:
            name = name.rsplit(".", 1)[0]  # `from .x import f`: `f` is no module, `x` is
        return name if name in paths else None

    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        targets = (resolve(name) for name, _top in imports(path, src) if name.startswith("trainmeter"))
        graph[module] = {t for t in targets if t is not None and t != module}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one module (Tarjan's, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                part = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    part.append(top)
                    if top == node:
                        break
                if len(part) > 1:
                    found.append(sorted(part))
    return found


def test_the_import_graph_has_no_circle() -> None:
    assert circles(import_graph()) == []


def test_the_checkers_see_a_circle_an_upward_import_and_a_string_import(tmp_path: Path) -> None:
    pkg = tmp_path / "trainmeter"
    (pkg / "runlog").mkdir(parents=True)
    (pkg / "views").mkdir()
    (pkg / "runlog" / "a.py").write_text("from . import b\nfrom ..views import c\n")
    (pkg / "runlog" / "b.py").write_text("def f():\n    from .a import x\n")
    (pkg / "views" / "c.py").write_text(
        "import importlib\nm = importlib.import_module('trainmeter.runlog.a')\n"
    )
    assert circles(import_graph(tmp_path)) == [["trainmeter.runlog.a", "trainmeter.runlog.b"]]
    assert upward_imports([pkg / "runlog" / "a.py"], src=tmp_path) == [
        "trainmeter/runlog/a.py (runlog) imports trainmeter.views (views)"
    ]
    assert imports_by_string(pkg / "views" / "c.py") == ["c.py:2 import_module('trainmeter.runlog.a')"]
