"""The engine as a whole: pure, deterministic, JSON-safe, robust to bad lines, and what it warns."""

from __future__ import annotations

import json
import math

from trainmeter import records
from trainmeter.engine import Engine

from .build import device, end, engine_of, fact, flat, gpu, hello, phase, rec, run, start, steps
from .test_budget import SHAPE
from .test_counters import h100_row
from .test_host_node import host, node


def rich_stream():
    """A bit of everything a real run logs."""
    return flat(
        start(0.0, budget_tokens=1e7, plan_mfu=0.4, plan_hours=1, convention="titan", **SHAPE),
        hello(0.1, world_size=2, probes=["steps", "tokens", "dataloader", "checkpoint", "eval"]),
        device(0.2, index=0, rank=0),
        device(0.2, index=1, rank=1),
        fact(0.3, "counted_flops_per_token", 7e9, "measured"),
        phase(0.9, "data", 0.2),
        steps(1.0, 0.5, 40, tokens=4096, real_tokens=4000),
        steps(1.0, 0.55, 40, tokens=4096, rank=1),
        [
            gpu(2.0 + i, h100_row(0, energy_j=100.0 * i), h100_row(1, energy_j=90.0 * i))
            for i in range(5)
        ],
        [host(1.0 + i, 10.0 + i) for i in range(5)],
        [node(1.0 + 10 * i, 1e6 * i, 1e5 * i) for i in range(3)],
        rec("metric", 5.0, src="emit", key="loss", value=2.5, via="emit", step=8),
        rec("metric", 6.0, key="eval/loss", value=2.7, via="wandb"),
        phase(12.0, "checkpoint", 1.0),
        phase(15.0, "eval", 0.5),
        end(22.0),
    )


def test_snapshot_is_json_without_nan():
    snap = run(rich_stream(), now=30.0)
    text = json.dumps(snap, allow_nan=False)
    assert json.loads(text) == snap  # plain JSON types only (no tuples, no objects)
    # the keys the seed names are there
    for key in (
        "steps",
        "tokens_seen",
        "tokens_per_s",
        "step_time_s",
        "series",
        "flops_per_token",
        "conventions",
        "flops_spent",
        "mfu",
        "peak",
        "n_gpus",
        "devices",
        "budget_tokens",
        "progress",
        "time",
        "counted",
        "plan",
        "ranks",
        "ladder",
        "ofu",
        "flops_observed",
        "arithmetic_intensity",
        "host",
        "node",
        "energy",
        "alerts",
        "facts",
        "warnings",
        "absent",
        "padding",
        "mfu_ofu_gap",
    ):
        assert key in snap, key
    assert snap["absent"]["eta_s"] == "the run has ended"  # no ETA once run.end is in


def test_empty_engine_is_json_and_names_what_is_absent():
    snap = Engine().snapshot()
    json.dumps(snap, allow_nan=False)
    assert "steps" not in snap  # no agent: unknown, never 0
    for key in (
        "steps", "tokens_seen", "tokens_per_s", "mfu", "flops_per_token", "flops_spent", "n_gpus", "progress", "time",
        "ofu", "energy",
    ):
        assert key in snap["absent"], key
        assert snap["absent"][key]


def test_same_records_same_snapshot():
    a, b = engine_of(rich_stream()), engine_of(rich_stream())
    assert a.snapshot(now=30.0) == b.snapshot(now=30.0)


def test_replay_of_the_logged_lines_equals_the_live_feed():
    live = engine_of(rich_stream())
    replay = Engine()
    for line in (records.encode(r) for r in rich_stream()):
        replay.feed(records.decode(line))
    assert replay.snapshot() == live.snapshot()


def test_snapshot_does_not_change_the_engine():
    engine = engine_of(rich_stream())
    first = engine.snapshot(now=30.0)
    engine.snapshot(now=1000.0)
    assert engine.snapshot(now=30.0) == first


def test_bad_records_are_counted_never_raised():
    engine = Engine()
    bad = [
        {},
        {"kind": "step"},
        {"kind": "step", "t": "soon", "d": {}},
        {"kind": "step", "t": math.nan, "d": {}},
        {"kind": "step", "t": 1.0, "d": "not a dict"},
        {"kind": "step", "t": 1.0, "rank": 0, "d": {"k": "many", "tokens": [1]}},
        {"kind": "metric", "t": 1.0, "d": {"key": 3, "value": None}},
        {"kind": "fact", "t": 1.0, "d": {"key": "device", "value": "H100"}},
        {"kind": "sample.gpu", "t": 1.0, "d": {"gpus": ["row", None, {"index": 0}]}},
        {"kind": "phase", "t": 1.0, "d": {"name": "data", "s": -3}},
        {"kind": "no.such.kind", "t": 1.0, "d": {}},
        None,
    ]
    for r in bad:
        engine.feed(r)  # type: ignore[arg-type]
    snap = engine.snapshot()
    json.dumps(snap, allow_nan=False)
    assert snap["records"]["fed"] == len(bad)
    assert snap["records"]["ignored"] >= 4
    assert any("could not be used" in w for w in snap["warnings"])


def test_alert_records_are_not_rederived():
    snap = run(rec("alert", 5.0, rank=None, src="tm", kind_="x"), start(0.0))
    assert snap["alerts"] == []


def test_moe_observe_only_and_dropped_warnings():
    snap = run(
        start(0.0),
        fact(1.0, "moe_experts", 64),
        fact(1.0, "observe_only", "attached to a running PID", "detected"),
        fact(2.0, "agent_dropped_records", 12, "measured"),
    )
    text = " | ".join(snap["warnings"])
    assert "64 experts" in text and "--params" in text
    assert "observe only (attached to a running PID)" in text
    assert "12 records were dropped" in text


def test_hello_probes_union_and_run_info():
    snap = run(
        start(0.0),
        hello(0.1, probes=("steps",)),
        hello(0.5, probes=("model", "flops")),
        hello(0.6, probes=("eval",), rank=1),  # other ranks' probes do not move the time split
        end(3.0, exit_status=3),
    )
    assert snap["agent"]["probes"] == ["flops", "model", "steps"]
    assert snap["run"]["exit_status"] == 3 and snap["run"]["argv"] == ["train.py"]


def test_position_is_cheap_and_agrees_with_the_snapshot():
    engine = engine_of(start(0.0, flops_per_token=6e9), steps(1.0, 1.0, 5, 1000))
    assert engine.position() == {"step": 5, "tokens": 5000.0, "flops": 3e13}


def test_memory_stays_flat_however_long_the_run():
    """Replay streams a log through the engine: its state must not grow with the records."""
    import tracemalloc

    def feed(engine, start_i, count):
        for i in range(start_i, start_i + count):
            t = 1.0 + i * 0.01
            engine.feed(rec("step", t, k=1, tokens=1000, n=i))
            if i % 5 == 0:
                engine.feed(
                    rec(
                        "metric", t, src="emit", key="loss", value=1.0 / (i + 1), via="emit", step=i
                    )
                )
            if i % 100 == 0:
                engine.feed(node(t, 1e6 * i, 1e5 * i))
                engine.feed(gpu(t, h100_row(0, energy_j=float(i))))

    engine = Engine()
    # traced from the first record: a block freed and reused after the start would otherwise
    # count as new (the float free list hides some reuses, not all: parts that free their
    # points a batch at a time looked larger than those that free one a step)
    tracemalloc.start()
    feed(engine, 0, 20_000)
    before = tracemalloc.take_snapshot()
    feed(engine, 20_000, 80_000)
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(s.size_diff for s in after.compare_to(before, "filename"))
    assert grown < 200_000, f"engine state grew by {grown} bytes over 80,000 more steps"
    assert engine.snapshot()["steps"] == 100_000
