"""docs/architecture.md names every module, so the map stays the territory: each module under
src/trainmeter/ (a package by its directory, `engine/`) is named in its "Modules" section, and
every module path named there exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "src" / "trainmeter"
DOC = ROOT / "docs" / "architecture.md"


def _modules_section() -> str:
    text = DOC.read_text()
    start = text.index("## Modules\n")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def _named(section: str) -> set[str]:
    """The module paths in the first cell of each table row (`| `engine/flops.py` | job |`)."""
    names: set[str] = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            first = line.split("|")[1]
            names.update(re.findall(r"`([A-Za-z0-9_/.]+(?:\.py|/))`", first))
    return names


def _modules() -> set[str]:
    out = set()
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG)
        if "static" in rel.parts:
            continue
        if rel.name == "__init__.py":
            out.add(rel.parent.as_posix() + "/" if rel.parent.parts else "__init__.py")
        else:
            out.add(rel.as_posix())
    return out


def test_every_module_is_named_in_architecture_md() -> None:
    missing = sorted(_modules() - _named(_modules_section()))
    assert not missing, (
        "docs/architecture.md's Modules section should name these, one line each "
        "(`path` | its job): " + ", ".join(missing)
    )


def test_every_module_named_there_exists() -> None:
    gone = sorted(
        name for name in _named(_modules_section())
        if not (PKG / name).exists() and name != "__init__.py"
    )
    assert not gone, f"docs/architecture.md names modules that are gone: {gone}"
