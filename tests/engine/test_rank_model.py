"""The rank model: a node's tm clocks its steps on its own local rank 0, not on global rank 0."""

from __future__ import annotations

import pytest

from .build import rec, run, start, steps


def node_hello(t, rank, local, node_rank=1, world=4, local_world=2, nodes=2, run_id="job7"):
    return rec(
        "hello", t, rank=rank, world_size=world, local_rank=local, local_world_size=local_world,
        node_rank=node_rank, nodes=nodes, run_id=run_id, probes=["steps"],
    )


def test_node_one_of_two_counts_its_own_ranks():
    # Node 1 of a 4-rank job holds ranks 2 and 3 (2 per node). Each rank sees 128 tokens a
    # step, one step a second. The node's clock is rank 2 (its local rank 0); the node has
    # 2 data-parallel ranks (dp 4 x 2/4), so 128 x 2 = 256 tokens a step, 256 tok/s; 6 steps
    # = 1,536 tokens. Rank 3 steps every 1.25 s: it is the node's slowest rank.
    snap = run(
        start(0.0),
        rec("hello", 0.05, rank=None, world_size=1, probes=[]),  # the launcher: no rank
        node_hello(0.1, 2, 0),
        node_hello(0.1, 3, 1),
        steps(1.0, 1.0, 6, tokens=128, rank=2),
        steps(1.0, 1.25, 6, tokens=128, rank=3),
        rec("metric", 3.0, rank=2, key="loss", value=2.5, via="emit"),
    )
    assert snap["steps"] == 6
    assert snap["tokens_seen"] == 6 * 128 * 2
    assert snap["tokens_per_s"] == pytest.approx(256)
    assert snap["step_time_s"] == pytest.approx(1.0)
    assert snap["ranks"]["slowest"] == "3"
    assert snap["series"]["train_loss"]["value"] == 2.5  # the node's clock logs the curve
    job = snap["job"]
    assert job["ranks"] == [2, 3] and job["clock_rank"] == 2 and not job["job_clock"]
    assert (job["node_rank"], job["nodes"], job["world_size"]) == (1, 2, 4)
    assert job["run_id"] == "job7" and job["local_world_size"] == 2


def test_run_id_from_tm_wins_over_the_ranks_and_node_zero_is_the_job_clock():
    snap = run(
        rec(
            "run.start",
            0.0,
            rank=None,
            src="tm",
            argv=["torchrun"],
            declared={},
            job={"run_id": "slurm-42", "run_id_source": "SLURM_JOB_ID"},
        ),
        node_hello(0.1, 0, 0, node_rank=0),
        node_hello(0.1, 1, 1, node_rank=0),
        steps(1.0, 0.5, 4, tokens=10, rank=0),
    )
    job = snap["job"]
    assert job["run_id"] == "slurm-42" and job["run_id_source"] == "SLURM_JOB_ID"
    assert job["clock_rank"] == 0 and job["job_clock"] and job["node_rank"] == 0
    assert snap["tokens_seen"] == 4 * 10 * 2  # dp 4 x 2/4 = 2 on this node


def test_without_local_rank_the_lowest_rank_is_the_clock_and_one_node_is_assumed():
    # A launcher that sets RANK and WORLD_SIZE only: ranks 4 and 5 report; rank 4 clocks.
    # With no node size known the node holds the job (dp = world size = 2): 50 x 2 a step.
    snap = run(
        start(0.0),
        rec("hello", 0.1, rank=5, world_size=2, probes=["steps"]),
        rec("hello", 0.1, rank=4, world_size=2, probes=["steps"]),
        steps(1.0, 1.0, 3, tokens=50, rank=4),
    )
    assert snap["steps"] == 3 and snap["tokens_seen"] == 3 * 50 * 2
    assert snap["job"]["clock_rank"] == 4 and snap["job"]["nodes"] == 1
    assert snap["job"]["run_id"] is None


def metric(t, rank, value, key="loss"):
    return rec("metric", t, rank=rank, key=key, value=value, via="emit")


def test_a_curve_every_rank_logs_is_the_clocks_even_when_another_copy_comes_first():
    # data parallel: rank 1's copy of each loss arrives just before rank 0's; values differ
    stream = [start(0.0)]
    for i in range(3):
        stream += [metric(1.0 + i, 1, 10.0 + i), metric(1.001 + i, 0, 1.0 + i)]
        stream += steps(1.002 + i, 1.0, 1, tokens=8, rank=0)
    stream.append(metric(9.0, 1, 99.0))
    series = run(*stream)["series"]["train_loss"]
    assert (series["count"], series["value"]) == (3, 3.0)  # rank 0's 1, 2, 3: none of rank 1's


def test_a_curve_only_another_rank_logs_is_taken_from_it_in_full():
    # pipeline parallel: the last stage (rank 3) logs the loss; rank 0 is the clock and never
    # does. Its values wait for two of the clock's step records, then all four go in, in order.
    stream = [start(0.0), rec("hello", 0.1, rank=0, world_size=4, local_rank=0, probes=["steps"])]
    for i in range(4):
        stream += [*steps(1.0 + i, 1.0, 1, tokens=8, rank=0), metric(1.5 + i, 3, 4.0 - i)]
    stream.append(metric(9.0, 3, 0.5, key="final_eval"))  # after the last step: the log ends
    snap = run(*stream)
    assert (snap["series"]["train_loss"]["count"], snap["series"]["train_loss"]["value"]) == (
        4,
        1.0,
    )
    assert snap["series"]["final_eval"]["value"] == 0.5
