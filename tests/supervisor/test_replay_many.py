"""Joining nodes' snapshots into the job's: sums, the job clock, GPU-weighted MFU, wall clocks."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainmeter.runlog.replay import ReplayResult
from trainmeter.runlog.replay_many import NodeRun, merge
from trainmeter.views.job_text import job_text


def node(
    rank, ranks, tokens, tps, mfu, gpus, times, *, unix, mono, t0, first, run_id="job7", clock=None
):
    snap = {
        "steps": 100,
        "tokens_seen": tokens,
        "tokens_per_s": tps,
        "step_time_s": 0.5,
        "mfu": {"convention": "megatron", "value": mfu, "n_gpus": gpus},
        "n_gpus": {"value": gpus},
        "ranks": {"step_time_s": times},
        "time": {"elapsed_s": 60.0},
        "energy": {"joules": 1000.0 * gpus},
        "series": {"loss": {"value": 2.0 + rank}},
        "job": {"run_id": run_id, "node_rank": rank, "nodes": 2, "world_size": 8,
                "ranks": ranks, "clock_rank": ranks[0], "job_clock": ranks[0] == 0},
    }
    start = {"kind": "run.start", "t": t0, "d": {"clock": {"unix": unix, "monotonic": mono}}}
    return NodeRun(Path(f"n{rank}"), ReplayResult(snapshot=snap, finished=True), start, first)


def two_nodes(**over):
    # node 1 is given first: the job clock is found by rank, not by order.
    # Node 0's monotonic clock reads 100 at unix 5000; node 1's reads 7 at unix 5001.
    # tm started at mono 100.0 (unix 5000.0) on node 0 and at mono 6.5 (unix 5000.5) on node 1.
    # First steps: node 0 at mono 110.0 -> unix 5010.0; node 1 at mono 16.25 -> unix 5010.25.
    n1 = node(1, [4, 5, 6, 7], 30_000.0, 300.0, 0.30, 6, {"4": 0.5, "5": 0.7, "6": 0.5, "7": 0.5},
              unix=5001.0, mono=7.0, t0=6.5, first=16.25, **over)
    n0 = node(0, [0, 1, 2, 3], 10_000.0, 100.0, 0.40, 2, {"0": 0.5, "1": 0.6, "2": 0.5, "3": 0.5},
              unix=5000.0, mono=100.0, t0=100.0, first=110.0)
    return [n1, n0]


def test_the_job_sums_its_nodes_and_takes_steps_and_curves_from_rank_zero():
    job = merge(two_nodes())
    assert job["tokens_seen"] == 40_000.0  # 10,000 + 30,000
    assert job["tokens_per_s"] == 400.0  # 100 + 300
    assert job["steps"] == 100 and job["series"]["loss"]["value"] == 2.0  # node 0's
    # MFU weighted by GPUs: (0.40 x 2 + 0.30 x 6) / 8 = (0.8 + 1.8) / 8 = 0.325
    assert job["mfu"]["value"] == pytest.approx(0.325) and job["mfu"]["n_gpus"] == 8
    assert job["n_gpus"]["value"] == 8
    assert job["energy"]["joules"] == 8000.0  # 2,000 + 6,000
    assert job["energy"]["joules_per_token"] == pytest.approx(0.2)  # 8,000 / 40,000
    # the slowest rank across nodes: rank 5 at 0.7 s, 0.7 / 0.5 - 1 = 40% above the fastest
    assert job["ranks"]["slowest"] == "5" and job["ranks"]["fastest"] == "0"
    assert job["ranks"]["spread"] == pytest.approx(0.4)
    info = job["job"]
    assert info["ranks"] == list(range(8)) and info["world_size"] == 8 and info["run_id"] == "job7"
    # wall clock: node 0 from 5000.0 to 5060.0, node 1 from 5000.5 to 5060.5 -> 60.5 s
    assert job["time"]["elapsed_s"] == pytest.approx(60.5)
    offsets = {n["node_rank"]: n["start_offset_s"] for n in job["time"]["nodes"]}
    assert offsets == {0: pytest.approx(0.0), 1: pytest.approx(0.5)}
    assert job["time"]["first_step_skew_s"] == pytest.approx(0.25)  # 5010.25 - 5010.0
    assert not [w for w in job["warnings"] if "apart" in w or "run ids" in w]


def test_disagreeing_run_ids_and_clocks_are_said():
    nodes = two_nodes(run_id="other")
    nodes[0].first_step_t = 26.25  # node 1's first step 10 s later by its clock
    job = merge(nodes)
    assert any("different run ids (job7, other)" in w for w in job["warnings"])
    assert any("first steps are 10.2s apart" in w for w in job["warnings"])
    assert job["job"]["run_id"] is None


def test_a_missing_node_is_named_and_mfu_under_two_conventions_is_not_averaged():
    nodes = two_nodes()
    nodes[0].result.snapshot["mfu"]["convention"] = "titan"
    job = merge(nodes)
    assert "mfu" not in job and "different conventions" in job["absent"]["mfu"]
    only = merge(nodes[1:])
    assert any("1 of 2 nodes and 4 of 8 ranks" in w for w in only["warnings"])


def test_the_job_reads_as_one_run_with_a_line_per_node():
    text = job_text(merge(two_nodes()))
    lines = text.splitlines()
    assert lines[0] == "job job7: 2 nodes of 2, 8 ranks, 8 GPUs"
    assert lines[1] == "slowest rank 5 (700 ms/step, 40.0% slower than rank 0)"
    assert lines[2].startswith(
        "  node 1: ranks 4,5,6,7, 100 steps, 30.0k tokens, 300 tok/s, MFU 30.0%"
    )
    assert lines[3].startswith(
        "  node 0: ranks 0,1,2,3, 100 steps, 10.0k tokens, 100 tok/s, MFU 40.0%"
    )
    assert "first steps 250 ms apart" in text
    flat = [" ".join(line.split()) for line in lines]  # the summary below: the job's totals
    assert "tokens/s 400" in flat and "so far 100 steps 40.0k tokens" in flat
    assert "MFU 32.5% (megatron)" in flat
    assert "None" not in text
