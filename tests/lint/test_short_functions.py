"""Functions of one job, short enough to read at once (issue 32 item 6): no function in these
files is longer than LONGEST lines, and `Engine.snapshot` reads as the list of its parts."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "trainmeter"
LONGEST = 80
#: Files whose functions were split (Engine.snapshot was 135 lines, attach.main 133, the
#: passport's _training 144).
FILES = ("engine/snapshot.py", "cli/attach.py", "views/passport.py", "views/passport_training.py",
         "views/passport_entry.py", "views/passport_context.py", "views/passport_sections.py")


def _lengths(path: Path) -> dict[str, int]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return {
        f"{node.name}:{node.lineno}": node.end_lineno - node.lineno + 1  # type: ignore[operator]
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }


def test_no_function_is_longer_than_80_lines() -> None:
    long = {
        f"{name} ({lines} lines)"
        for rel in FILES
        for name, lines in _lengths(SRC / rel).items()
        if lines > LONGEST
    }
    assert not long


def test_engine_snapshot_reads_as_its_parts() -> None:
    lengths = _lengths(SRC / "engine" / "snapshot.py")
    (snapshot,) = [n for n in lengths if n.startswith("snapshot:")]
    assert lengths[snapshot] < 50
