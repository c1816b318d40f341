"""Every key the engine produces for hand-built runs (a bit of everything, a live run with a
plan, busy and idle GPUs, no agent) is in docs/snapshot.md's table."""

from __future__ import annotations

from trainmeter.engine import Engine

from .build import run
from .snapshot_keys import documented, paths, undocumented
from .test_engine import rich_stream
from .test_explain import live_run
from .test_missing_numbers import busy_and_idle


def test_hand_built_snapshots_are_documented():
    for snap in (run(rich_stream(), now=30.0), live_run(), busy_and_idle(), Engine().snapshot()):
        assert undocumented(snap) == []


def test_paths_use_placeholders_for_data_keys():
    snap = busy_and_idle()
    got = paths(snap)
    assert "ladder.gpus.<gpu>.ofu" in got and "ladder.covers" in got
    assert not any(".0." in p or p.endswith(".0") for p in got)
    assert "mfu.by_convention.<convention>" in got
    assert {"explain.<name>.inputs[].source", "absent.<name>"} <= documented()
