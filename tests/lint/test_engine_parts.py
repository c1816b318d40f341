"""No part of the engine reads the snapshot (docs/architecture.md, "Engine API"): each is given
its inputs by name by `Engine.snapshot` and gives back a `Section`. Checked from the source
(no run): no function of an engine module takes the snapshot or the whole engine, and
`Engine.snapshot` hands its snapshot to nothing but the last pass that keeps infinities out.
"""

from __future__ import annotations

import ast
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[2] / "src" / "trainmeter" / "engine"
#: Parameter names that mean "the snapshot" or "the whole engine".
WHOLE = {"snap", "snapshot", "engine"}
#: Functions that do take a whole snapshot, and why they are not parts of one.
NOT_PARTS = {
    "finite.finite_only": "the last pass over the built snapshot: no infinity or NaN leaves",
    "noise.blocks_of": "`tm check` reads a finished run's step-time blocks out of summary.json",
}


def _functions(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    a = fn.args
    named = a.posonlyargs + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]
    return [p.arg for p in named]


def test_no_engine_part_takes_the_snapshot_or_the_engine() -> None:
    found = []
    for path in sorted(ENGINE.glob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for fn in _functions(tree):
            where = f"{path.stem}.{fn.name}"
            if where in NOT_PARTS:
                continue
            taken = WHOLE.intersection(_params(fn))
            if taken:
                found.append(f"{path.name}:{fn.lineno} {fn.name}({', '.join(sorted(taken))})")
    assert not found, "engine parts take their inputs by name, not the snapshot: " + str(found)


def _engine_snapshot() -> ast.FunctionDef:
    tree = ast.parse((ENGINE / "snapshot.py").read_text())
    engine = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Engine")
    return next(
        n for n in engine.body if isinstance(n, ast.FunctionDef) and n.name == "snapshot"
    )


def test_the_snapshot_being_built_is_handed_to_no_part() -> None:
    handed = []
    for call in ast.walk(_engine_snapshot()):
        if not isinstance(call, ast.Call):
            continue
        args = list(call.args) + [k.value for k in call.keywords]
        if any(isinstance(a, ast.Name) and a.id == "snap" for a in args):
            handed.append(ast.unparse(call.func))
    assert handed == ["finite_only"]
