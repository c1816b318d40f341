"""Every key the engine produces for hand-built runs (a bit of everything, a live run with a
plan, busy and idle GPUs, no agent, a model without tokens, a replayed log with a bad line) is in
docs/snapshot.md's table."""

from __future__ import annotations

import json

from trainmeter.engine import Engine

from .build import run
from .snapshot_keys import documented, paths, undocumented
from .test_engine import rich_stream
from .test_explain import live_run
from .test_missing_numbers import busy_and_idle
from .test_samples import cnn_run


def test_hand_built_snapshots_are_documented():
    for snap in (run(rich_stream(), now=30.0), live_run(), busy_and_idle(), Engine().snapshot()):
        assert undocumented(snap) == []


def test_samples_waterfall_advice_and_the_log_are_documented(tmp_path):
    from trainmeter.runlog.replay import replay

    samples = cnn_run()
    assert {"samples", "waterfall"} <= set(samples) and "mfu" in samples["samples"]
    assert undocumented(samples) == []
    events = tmp_path / "events.jsonl"
    lines = [json.dumps(r) for r in run_records()] + ["not json at all"]
    events.write_text("\n".join(lines) + "\n")
    snap = replay(events).snapshot
    assert snap["log"]["skipped"] == 1 and snap["log"]["reasons"]
    assert undocumented(snap) == []


def run_records():
    from .build import end, hello, start, steps

    return [start(0.0), hello(0.1), *steps(1.0, 1.0, 6, 1000), end(8.0)]


def test_paths_use_placeholders_for_data_keys():
    snap = busy_and_idle()
    got = paths(snap)
    assert "ladder.gpus.<gpu>.ofu" in got and "ladder.covers" in got
    assert not any(".0." in p or p.endswith(".0") for p in got)
    assert "mfu.by_convention.<convention>" in got
    assert {"explain.<name>.inputs[].source", "absent.<name>"} <= documented()
