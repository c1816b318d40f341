"""A replay's typed decoding (`runlog/typed.py`) takes exactly the lines the decoder takes, with
the same values, counts the same skips with the same reasons, and the engine reads a typed record
as it reads the dict (`Engine.feed_many`): the same snapshot, the same points."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainmeter.engine import Engine
from trainmeter.runlog import replay as replay_module
from trainmeter.runlog.decode import Decoder
from trainmeter.runlog.replay import replay
from trainmeter.runlog.typed import ENVELOPED, TYPED, typed_many

from .test_decode_fast import STEP, TRICKY, _records

pytest.importorskip("msgspec")
START = b'{"v":1,"t":0,"src":"tm","rank":null,"pid":1,"kind":"run.start","d":{"argv":[]}}'


def _as_dict(record) -> list:
    """A record as the decoder's dict would hold it (fields it did not carry left out), its
    keys sorted (a typed record keeps its kind's field order)."""
    return sorted((k, sorted(v.items()) if isinstance(v, dict) else v)
                  for k, v in _fields(record).items())


def _fields(record) -> dict:
    if type(record) is dict:
        d = record["d"] if isinstance(record["d"], dict) else record["d"]
        out = {k: v for k, v in record.items() if k != "d" and v is not None}
        out["d"] = {k: v for k, v in d.items() if v is not None} if isinstance(d, dict) else d
        return out
    out = {k: getattr(record, k) for k in ("v", "t", "src", "rank", "pid", "q", "r", "recovered")}
    out = {k: v for k, v in out.items() if v is not None}
    out["kind"] = record.kind
    d = record.d
    out["d"] = ({k: v for k, v in d.items() if v is not None} if type(d) is dict else
                {f: getattr(d, f) for f in d.__struct_fields__ if getattr(d, f) is not None})
    return out


def _both(lines: list[bytes]) -> tuple[tuple, tuple]:
    plain, typed = Decoder(), Decoder()
    got_plain = [(line, _as_dict(r)) for line, r in plain.many(lines)]
    got_typed = [(line, _as_dict(r)) for line, r in typed_many(typed, lines)]
    said = lambda d: (d.lines, d.good, d.skipped, d.reasons, d.ended, d.t_start)  # noqa: E731
    return (repr(got_plain), said(plain)), (repr(got_typed), said(typed))


def test_tricky_lines_are_taken_and_skipped_as_the_decoder_does() -> None:
    lines = [START] + [STEP] * 40 + TRICKY + [STEP]
    read = [r for _, r in typed_many(Decoder(), lines)]
    assert sum(type(r) is TYPED["step"] for r in read) == 41  # the agent's steps: typed
    plain, typed = _both(lines)
    assert typed == plain  # repr: an int that came back a float would show
    assert plain[1][2] >= 20


@settings(max_examples=150, deadline=None)
@given(st.lists(_records, min_size=1, max_size=40))
def test_random_records_are_read_the_same(recs: list[dict]) -> None:
    lines = [START] + [json.dumps(r).encode() for r in recs] + [STEP] * 3
    plain, typed = _both(lines)
    assert typed == plain


_hot = st.one_of(
    st.fixed_dictionaries(
        {"kind": st.just("step"), "rank": st.sampled_from([None, 0, 1]),
         "d": st.fixed_dictionaries({}, optional={
             "k": st.integers(0, 5), "tokens": st.integers(0, 10**6),
             "real_tokens": st.integers(0, 10), "n": st.integers(0, 100),
             "micro": st.integers(0, 4)})}),
    st.fixed_dictionaries(
        {"kind": st.just("metric"), "rank": st.sampled_from([None, 0, 1, 2]),
         "src": st.sampled_from(["emit", "agent"]),
         "d": st.fixed_dictionaries({"key": st.sampled_from(["loss", "train/loss", "lr"])},
                                    optional={"value": st.one_of(st.integers(-5, 5), st.floats(-1e6, 1e6)),
                                              "via": st.sampled_from(["emit", "wandb"]),
                                              "step": st.integers(0, 50)})}),
    st.fixed_dictionaries(
        {"kind": st.just("phase"), "rank": st.sampled_from([None, 0, 1]),
         "d": st.fixed_dictionaries({"name": st.sampled_from(["data", "eval"])},
                                    optional={"s": st.floats(0, 5), "n": st.integers(0, 3)})}),
)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(_hot, st.floats(0, 0.5)), min_size=1, max_size=60))
def test_the_engine_reads_a_typed_record_as_the_dict(recs: list) -> None:
    t, lines = 1.0, [START]
    for rec, dt in recs:
        t += dt
        lines.append(json.dumps({"v": 1, "t": t, "src": rec.get("src", "agent"), "rank": rec["rank"],
                                 "pid": 7, "kind": rec["kind"], "d": rec["d"]}).encode())
    as_dicts, as_typed = Engine(), Engine()
    as_dicts.take_points(), as_typed.take_points()
    as_dicts.feed_many([r for _, r in Decoder().many(lines)])
    typed = [r for _, r in typed_many(Decoder(), lines)]
    as_typed.feed_many(typed)
    assert as_typed.snapshot(now=t) == as_dicts.snapshot(now=t)
    assert as_typed.take_points() == as_dicts.take_points()
    assert as_typed.sample(now=t) == as_dicts.sample(now=t)


def test_a_replay_is_the_same_read_typed_or_not(tmp_path: Path, monkeypatch) -> None:
    events = tmp_path / "events.jsonl"
    steps = [b'{"v":1,"t":%d.5,"src":"agent","rank":0,"pid":1,"kind":"step","d":{"k":1,"tokens":512,"n":%d}}'
             % (i, i) for i in range(1, 400)]
    events.write_bytes(b"\n".join([START] + steps[:200] + TRICKY + steps[200:]) + b'\n{"v":1,')
    typed = replay(events, resume=False)
    monkeypatch.setattr(replay_module, "typed_many", lambda decoder, lines: decoder.many(lines))
    plain = replay(events, resume=False)
    assert typed.snapshot == plain.snapshot
    assert (typed.lines, typed.records, typed.bad, typed.bad_reasons, typed.finished) == (
        plain.lines, plain.records, plain.bad, plain.bad_reasons, plain.finished,
    )


def test_the_ledger_refuses_the_same_steps_read_typed() -> None:
    """50 step records of k = 999,999 in a 10 s run: the ledger (what the time since run.start
    allows) refuses the same ones, with the same reason, whichever way they are read."""
    lines = [START] + [
        b'{"v":1,"t":%g,"src":"agent","rank":0,"pid":1,"kind":"step","d":{"k":999999,"n":%d}}'
        % (0.2 * i, i) for i in range(1, 51)
    ] + [b'{"v":1,"t":9,"src":"agent","rank":0,"pid":1,"kind":"phase","d":{"name":"eval","s":1e6}}']
    plain, typed = _both(lines)
    assert typed == plain
    assert plain[1][2] >= 40 and any("implausible" in r for r in plain[1][3])


def test_the_ledger_counts_processes_and_phases_the_same_read_typed() -> None:
    """300 processes saying they are rank 0 (a phase, then a step each, the phase's first
    record of its kind for that process), a phase past the time allowed and one past the
    occurrences allowed: the typed path (`Ledger.step`, `Ledger.phase` given the fields by name)
    refuses the same lines, with the same reasons, as the decoder's dict path."""
    lines = [START]
    for pid in range(300):
        lines.append(b'{"v":1,"t":%d,"src":"agent","rank":0,"pid":%d,"kind":"phase",'
                     b'"d":{"name":"data","s":0.01,"n":1}}' % (pid + 1, pid))
        lines.append(b'{"v":1,"t":%d,"src":"agent","rank":0,"pid":%d,"kind":"step",'
                     b'"d":{"k":1,"tokens":8}}' % (pid + 1, pid))
    lines += [
        b'{"v":1,"t":400,"src":"agent","rank":0,"pid":1,"kind":"phase","d":{"name":"eval","s":500}}',
        b'{"v":1,"t":401,"src":"agent","rank":0,"pid":1,"kind":"phase","d":{"name":"eval","s":1}}',
        b'{"v":1,"t":402,"src":"agent","rank":0,"pid":2,"kind":"phase","d":{"name":"io","n":1e9}}',
        b'{"v":1,"t":403,"src":"agent","rank":null,"pid":2,"kind":"phase","d":{"name":"io","n":2}}',
    ]
    plain, typed = _both(lines)
    assert typed == plain
    assert plain[1][3] == {"implausible phase rate": 44, "implausible step rate": 44,
                           "implausible phase time": 2}
    read = [r for _, r in typed_many(Decoder(), lines)]
    assert sum(type(r) is TYPED["phase"] for r in read) == 256 + 2  # read typed, not handed on


def test_the_samplers_readings_are_read_typed_with_the_same_values_and_refusals() -> None:
    """`sample.gpu`, `sample.host` and `sample.node` lines: read typed (the envelope checked,
    `d` a dict), the same values as the decoder's dicts; a reading it cannot be sure of (a
    number past a float's range, a field the envelope does not have, a lone surrogate) goes to
    the decoder, which refuses or takes it with its own reason; the engine's snapshot is the
    same either way."""
    gpu = (b'{"v":1,"t":%d,"src":"tm","rank":null,"pid":1,"kind":"sample.gpu","d":{"gpus":'
           b'[{"index":0,"uuid":"GPU-0","name":"NVIDIA H100 80GB HBM3","gpu_util":0.9,'
           b'"sm_active":0.8,"tensor_active":0.5,"sm_clock_mhz":1980,"max_sm_clock_mhz":1980,'
           b'"window_s":1.0,"energy_j":%d}],"selected_by":"all"}}')
    host = b'{"v":1,"t":%d,"src":"tm","rank":null,"pid":1,"kind":"sample.host","d":{"procs":3,"cpu_s":%d}}'
    node = (b'{"v":1,"t":%d,"src":"tm","rank":null,"pid":1,"kind":"sample.node",'
            b'"d":{"cpu":{"user":0.5,"idle":0.5},"cores":16,"load":[1,1,1]}}')
    lines = [START]
    for i in range(1, 40):
        lines += [gpu % (i, 700 * i), host % (i, i), node % i, STEP.replace(b'"t":5', b'"t":%d' % i)]
    lines += [
        b'{"v":1,"t":41,"src":"tm","rank":null,"pid":1,"kind":"sample.host","d":{"cpu_s":1e400}}',
        b'{"v":1,"t":42,"src":"tm","rank":null,"pid":1,"kind":"sample.node","d":{"x":"\\ud800"}}',
        b'{"v":1,"t":43,"src":"tm","rank":null,"pid":1,"kind":"sample.node","x":1,"d":{}}',
        b'{"v":1,"t":-1,"src":"tm","rank":null,"pid":1,"kind":"sample.host","d":{}}',
    ]
    read = [r for _, r in typed_many(Decoder(), lines)]
    assert sum(type(r) in ENVELOPED.values() for r in read) == 3 * 39
    assert all(type(r.d) is dict for r in read if type(r) in ENVELOPED.values())
    plain, typed = _both(lines)
    assert typed == plain
    # 1e400 (not finite) and t=-1 refused; the other two are the decoder's to take
    assert plain[1][1:4] == (len(lines) - 2, 2, {"implausible sample.host": 2})
    as_dicts, as_typed = Engine(), Engine()
    as_dicts.feed_many([r for _, r in Decoder().many(lines)])
    as_typed.feed_many(read)
    assert as_typed.snapshot(now=50.0) == as_dicts.snapshot(now=50.0)
    assert as_typed.records == as_dicts.records and as_typed.ignored == as_dicts.ignored == 0


def test_the_only_typed_kinds_the_ledger_counts_are_step_and_phase() -> None:
    """`typed_many` admits a typed step or phase in the `Ledger` itself and passes every other
    typed kind straight on: a kind made typed that the ledger counts (a comm wait, a crash)
    would go uncounted, so it must be added there first. The typed records are not tracked by
    the cycle collector (`gc=False`: they hold numbers, strings and JSON's dicts, never a cycle),
    so a replay's millions of them do not set off its collections."""
    from trainmeter.runlog.decode import _LEDGER_KINDS

    assert {*TYPED, *ENVELOPED} & _LEDGER_KINDS == {"step", "phase"}
    assert not any(cls.__struct_config__.gc for cls in [*TYPED.values(), *ENVELOPED.values()])


def _blocks(lines: list[bytes], cuts: list[int]) -> tuple[tuple, tuple]:
    """`lines` read in blocks cut at `cuts` by the decoder's own path and by `typed_many`, one
    decoder each: what each took (line and values), its counts and reasons, and its `Ledger`'s
    counters (what the next records' budgets are measured against)."""
    plain, typed = Decoder(), Decoder()
    bounds = [0, *sorted(set(cuts)), len(lines)]
    got_plain, got_typed = [], []
    for a, b in zip(bounds, bounds[1:], strict=False):
        got_plain += [(line, _as_dict(r)) for line, r in plain.many(lines[a:b])]
        got_typed += [(line, _as_dict(r)) for line, r in typed_many(typed, lines[a:b])]

    def said(d: Decoder) -> tuple:
        ledger = d.ledger
        return (d.lines, d.good, d.skipped, d.reasons, d.ended, d.t_start, ledger.steps,
                ledger.phases, ledger.pids, ledger.anchor)

    return (repr(got_plain), repr(said(plain))), (repr(got_typed), repr(said(typed)))


def _line(t: float, kind: str, d: dict, pid: int = 1, rank: int | None = 0) -> bytes:
    return json.dumps({"v": 1, "t": t, "src": "agent", "rank": rank, "pid": pid, "kind": kind,
                       "d": d}, separators=(",", ":")).encode()


def test_a_block_of_typed_rare_and_bad_lines_is_read_as_the_decoder_reads_it() -> None:
    """Typed steps and phases of two processes (one of them also as rank null), mixed in one
    block with lines `typed_many` hands on: a bad line, a record of each rare kind (memory, a
    fact, an alert, a comm wait and a crash, whose `Ledger` counters share their keys with the
    phases named "comm wait" and "crashes"), a budget crossed by a process already met, a run
    cut short by a torn line. Read in one block, in blocks of 7 and line by line, `typed_many`
    (whose steps and phases add to the `Ledger`'s own counters of a process it has counted)
    takes, skips and counts exactly what the decoder's path does, and leaves the same `Ledger`."""
    lines = [START]
    for i in range(1, 30):
        t = i * 0.5
        for pid, rank in ((1, 0), (2, 1), (1, None)):
            lines.append(_line(t, "phase", {"name": "data", "s": 0.01, "n": 1}, pid, rank))
            lines.append(_line(t, "step", {"k": 1, "tokens": 4096, "n": i}, pid, rank))
            lines.append(_line(t, "metric", {"key": "loss", "value": 1 / i, "step": i}, pid, rank))
        lines.append(_line(t, "phase", {"name": "comm wait", "s": 0.2}, 2, 1))
        lines.append(_line(t, "phase", {"name": "crashes", "s": 0.1, "n": 1}, 1, 0))
        if i % 3 == 0:
            lines.append(_line(t, "comm", {"k": 1, "n": i, "s": 0.3}, 2, 1))
            lines.append(_line(t, "memory", {"device": "cuda", "index": 0, "allocated_b": 1 << 30}))
            lines.append(b"not json")
        if i % 5 == 0:
            lines.append(_line(t, "crash", {"type": "RuntimeError", "message": "x"}, 1, 0))
            lines.append(_line(t, "fact", {"key": "n_params", "value": 1000 * i}))
            lines.append(b'{"v":1,"t":%g,"src":"tm","rank":null,"pid":1,"kind":"alert",'
                         b'"d":{"kind":"stall","message":"no step"}}' % t)
            lines.append(_line(t, "step", {"k": 40_000 * i, "tokens": 1}, 2, 1))  # past its budget
            lines.append(_line(t, "phase", {"name": "data", "s": 3.0 * i}, 1, 0))  # past its time
            lines.append(_line(t, "comm", {"k": 1, "n": i, "s": 9.0 * i}, 2, 1))  # past its time
    lines.append(b'{"v":1,"t":20,"src":"agent","rank":0,"pid":1,"kind":"step","d":{"k":1,')
    for cuts in ([], list(range(7, len(lines), 7)), list(range(1, len(lines)))):
        plain, typed = _blocks(lines, cuts)
        assert typed == plain
    decoder = Decoder()
    decoder.many(lines)
    assert set(decoder.reasons) == {"not JSON", "implausible step rate", "implausible phase time",
                                    "implausible comm wait"}, decoder.reasons
    read = [r for _, r in typed_many(Decoder(), lines)]
    assert sum(type(r) is TYPED["step"] for r in read) > 80  # the fast path was taken


_ledgered = st.tuples(
    st.sampled_from(["step", "phase", "comm", "crash", "metric", "bad"]),
    st.sampled_from([0.0, 0.2, 1.0, 2.5, 7.0]),  # t: not in order
    st.sampled_from([(1, 0), (1, None), (2, 0), (2, 1)]),  # pid, rank
    st.sampled_from([None, 0, 1, 60_000, 999_999]),  # a step's k
    st.sampled_from([None, 0, 10**9, 6 * 10**9]),  # its tokens
    st.sampled_from(["data", "comm wait", "crashes", None]),  # a phase's name
    st.sampled_from([None, 0, 0.4, 1, 2.0]),  # its seconds, a comm's
    st.sampled_from([None, 1, 10**6]),  # its occurrences
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_ledgered, min_size=1, max_size=80), st.lists(st.integers(1, 80), max_size=6))
def test_budgets_near_their_limits_are_counted_as_the_ledger_counts_them(recs, cuts) -> None:
    """Steps, phases, comm waits and crashes of a few processes with budgets near their limits,
    times out of order, ranks null and 0 of one pid and one pid with two ranks, read in blocks
    cut anywhere: `typed_many`'s in-line budget (on the `Ledger`'s own counters) refuses the
    same records with the same reasons as the `Ledger` itself, and leaves the same counters."""
    lines = [START]
    for kind, t, (pid, rank), k, tokens, name, s, n in recs:
        if kind == "bad":
            lines.append(b'{"v":1,"t":')
            continue
        d = {
            "step": {"k": k, "tokens": tokens},
            "phase": {"name": name, "s": s, "n": n},
            "comm": {"s": s, "k": 1},
            "crash": {"type": "E"},
            "metric": {"key": "loss", "value": t},
        }[kind]
        lines.append(_line(t, kind, {f: v for f, v in d.items() if v is not None}, pid, rank))
    plain, typed = _blocks(lines, [c for c in cuts if c < len(lines)])
    assert typed == plain
