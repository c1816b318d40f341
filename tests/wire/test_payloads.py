"""The table of record kinds (`payloads.py`) is the interface in fact: every kind round-trips
through its payload type, a field it does not have is refused where the payload is built, and
the table names exactly the modules that make and read each kind."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from trainmeter import payloads, records
from trainmeter.engine import Engine
from trainmeter.runlog.decode import Decoder
from trainmeter.runlog.typed import ENVELOPED, TYPED, typed_many

PKG = Path(payloads.__file__).resolve().parent

#: A plausible value of each type a field may take.
SAMPLE = {int: 3, float: 0.5, str: "x", bool: True, list: [], dict: {}, object: 7}


def _value(types: tuple[type, ...]) -> object:
    return next(SAMPLE[t] for t in types if t in SAMPLE)


def _full(kind: payloads.Kind) -> dict:
    """A payload with every field of the kind set, built through its table entry."""
    return kind.build(**{name: _value(types) for name, (types, _) in kind.fields.items()})


@pytest.mark.parametrize("name", sorted(payloads.KINDS))
def test_each_kind_round_trips_through_its_payload_type(name: str) -> None:
    kind = payloads.KINDS[name]
    d = _full(kind)
    assert set(d) == set(kind.fields)
    start = records.make("run.start", payloads.RUN_START.build(argv=["x"]), t=10.0, src="tm")
    rank = None if kind.writers == ("tm",) else 0
    # 10 s into the run: time enough for every sample value (a phase of 3 s, 3 steps)
    record = records.make(name, d, t=20.0, src=kind.writers[0], rank=rank, pid=42)
    lines = [records.encode(start).encode(), records.encode(record).encode()]
    got = Decoder().many(lines)  # tm's one reader of lines, as a replay reads them
    assert [r["kind"] for _, r in got] == ["run.start", name]
    back = got[-1][1]
    assert back["d"] == d and json.loads(lines[1]) == back
    engine = Engine()
    for _, r in got:
        engine.feed(r)
    assert engine.ignored == 0  # the engine reads every field it is given without failing
    if name in TYPED:  # a replay reads the common kinds typed: the same fields, as attributes
        typed = typed_many(Decoder(), lines)[-1][1]
        assert type(typed) is TYPED[name] and typed.kind == name
        assert {f: getattr(typed.d, f) for f in kind.fields} == d
        fed = Engine()
        fed.feed_many([r for _, r in typed_many(Decoder(), lines)])
        assert fed.ignored == 0 and fed.snapshot(now=12.0) == engine.snapshot(now=12.0)
    if name in ENVELOPED:  # a sampler's reading: the envelope typed, `d` the same dict
        typed = typed_many(Decoder(), lines)[-1][1]
        assert type(typed) is ENVELOPED[name] and typed.kind == name and typed.d == d
        fed = Engine()
        fed.feed_many([r for _, r in typed_many(Decoder(), lines)])
        assert fed.ignored == 0 and fed.snapshot(now=12.0) == engine.snapshot(now=12.0)


def test_build_refuses_a_field_the_kind_does_not_have() -> None:
    with pytest.raises(TypeError, match="a step record has no field 'token'"):
        payloads.STEP.build(k=1, token=5)
    alert = payloads.ALERT.build(kind="stuck", message="m", last_step_t=3.0)  # open: its inputs
    assert alert["last_step_t"] == 3.0


def test_unknown_left_out_or_null_as_the_table_says() -> None:
    assert payloads.STEP.build(k=1, tokens=None) == {"k": 1}
    assert payloads.RUN_END.build(exit_status=0, signal=None) == {"exit_status": 0, "signal": None}


def test_the_wire_schema_reads_its_kinds_and_value_rule_from_the_table() -> None:
    assert records.KINDS == set(payloads.KINDS)
    assert records.FACT_KEYS is payloads.EMITTED_FACT_KEYS
    assert payloads.value_is_fact("emit", "tokens_per_step")
    assert not payloads.value_is_fact("wandb", "tokens_per_step")
    assert records.value_record("tokens_per_step", 9, "emit", t=1.0)["kind"] == "fact"
    engine = Engine()
    read = set(engine._handlers)
    assert read == set(payloads.KINDS) - {"alert"}  # alerts are logged for people, never read


def _references() -> dict[str, set[str]]:
    """Kind constant -> the modules that name it (`payloads.STEP`, `from ..payloads import STEP`)."""
    names = {n for n, k in vars(payloads).items() if isinstance(k, payloads.Kind)}
    refs: dict[str, set[str]] = {n: set() for n in names}
    for path in sorted(PKG.rglob("*.py")):
        rel = str(path.relative_to(PKG))
        if rel == "payloads.py":
            continue
        tree = ast.parse(path.read_text())
        imported = {
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("payloads")
            for alias in node.names
        }
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id == "payloads" and node.attr in names):
                refs[node.attr].add(rel)
            elif isinstance(node, ast.Name) and node.id in names and node.id in imported:
                refs[node.id].add(rel)
    return refs


def test_the_table_names_every_module_that_makes_or_reads_a_kind() -> None:
    by_name = {n: k for n, k in vars(payloads).items() if isinstance(k, payloads.Kind)}
    assert {k.name for k in by_name.values()} == set(payloads.KINDS)
    for name, modules in _references().items():
        kind = by_name[name]
        assert set(kind.made_in) | set(kind.read_in) == modules, name
        assert not set(kind.made_in) & set(kind.read_in) - {"supervisor/ring.py"}, name
