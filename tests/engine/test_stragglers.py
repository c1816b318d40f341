"""Per-rank compute and wait, and the straggler rule, from hand-built `comm` records.

The job in most tests: every step lasts 0.1 s on every rank (a synchronous job), each rank
sends one `comm` record per step. A slow rank computes longer and waits less: with rank 1
computing 0.08 s and waiting 0.02 s, and rank 0 computing 0.02 s and waiting 0.08 s, rank 1's
excess is 0.08 - 0.02 = 0.06 s a step, 60% of the 0.1 s step. The grid: 0.2 s / 0.1 s = 2
steps, raised to the 4-step minimum (a power of two): blocks are steps 5-8, 9-12, 13-16, ...
(the first record, at step 1, is the base; the first boundary is step 4).
"""

from __future__ import annotations

import pytest

from trainmeter.engine import waterfall
from trainmeter.engine.stragglers import PERSIST, SHARE, Stragglers

from .build import end, hello, rec, run, start, step


def comm(t: float, n: int, s: float, rank: int, k: int = 1, spans_s: float = 0.0, calls: int = 3):
    return rec("comm", t, rank=rank, k=k, n=n, s=s, spans_s=spans_s, calls=calls, timed="host")


def job(waits: dict[int, list[float]], dt: float = 0.1, with_steps: bool = False) -> list:
    """Records of a synchronous job: step n at t = 1 + dt * n on every rank, rank r waiting
    `waits[r][n - 1]` in step n."""
    ranks = sorted(waits)
    out = [start(0.0)] + [hello(0.1 + r / 100, world_size=len(ranks), rank=r,
                                probes=("steps", "collectives")) for r in ranks]
    for n in range(1, len(waits[ranks[0]]) + 1):
        t = 1.0 + dt * n
        for r in ranks:
            if with_steps:
                out.append(step(t, 100, rank=r))
            out.append(comm(t, n, waits[r][n - 1], r))
    return out


def test_the_slow_rank_named_with_its_extra_time_since_and_cost():
    snap = run(job({0: [0.08] * 16, 1: [0.02] * 16}))
    named = snap["straggler"]
    assert (named["kind"], named["rank"], named["ranks"]) == ("rank", 1, [1])
    assert named["extra_s"] == pytest.approx(0.06)  # 0.08 - 0.02 of compute a step
    assert named["step_time_s"] == pytest.approx(0.1)
    assert named["extra_share"] == pytest.approx(0.6)  # 0.06 / 0.1
    assert (named["since_step"], named["until_step"], named["steps"]) == (5, 16, 12)
    assert named["others"] == 1 and named["active"] is True
    rows = snap["comm"]["ranks"]
    assert rows["0"]["compute_s"] == pytest.approx(0.02) and rows["0"]["wait_s"] == pytest.approx(0.08)
    assert rows["1"]["compute_s"] == pytest.approx(0.08) and rows["1"]["wait_share"] == pytest.approx(0.2)
    # every record counts in the totals: 16 steps of 0.08 s, the first step's included
    assert rows["0"]["wait_total_s"] == pytest.approx(16 * 0.08)
    assert (rows["0"]["steps"], rows["0"]["calls"]) == (16, 48)
    assert snap["comm"]["window"] == {"kind": "trailing", "blocks": 3, "block_steps": 4}
    assert "straggler" not in snap["absent"]
    (alert,) = [a for a in snap["alerts"] if a["kind"] == "straggler"]
    assert (alert["key"], alert["rank"], alert["since_step"]) == ("straggler:rank:1", 1, 5)
    assert alert["extra_s"] == pytest.approx(0.06)
    (advice,) = [a for a in snap["advice"] if a["kind"] == "slow_rank"]
    assert advice["message"].startswith("Rank 1 computes 60 ms longer a step")
    assert "since step 5" in advice["message"] and "60% of the job's step time" in advice["message"]


def test_named_only_after_three_blocks_in_a_row():
    snap = run(job({0: [0.08] * 15, 1: [0.02] * 15}))  # step 16 not reached: 2 blocks
    assert "straggler" not in snap
    assert snap["absent"]["straggler"] == "needs 3 blocks of 4+ steps from two ranks or more (2 so far)"
    assert PERSIST == 3


def test_no_rank_named_under_the_threshold_or_when_it_does_not_persist():
    # rank 1 computes 0.009 s more a step: 9% of the 0.1 s step, under 10%
    assert SHARE == 0.10
    snap = run(job({0: [0.0545] * 40, 1: [0.0455] * 40}))
    assert "straggler" not in snap and snap["comm"]["episodes"] == []
    assert "straggler" not in snap["absent"]  # judged: nobody is slow
    assert [a for a in snap["alerts"] if a["kind"] == "straggler"] == []
    # slow in two blocks, then one block even, then two slow blocks: never three in a row
    slow, even = [0.08] * 4, [0.05] * 4
    w0 = [0.08] * 4 + slow + slow + even + slow + slow + even
    w1 = [0.02] * 4 + [0.02] * 8 + even + [0.02] * 8 + even
    snap = run(job({0: w0, 1: w1}))
    assert "straggler" not in snap and snap["comm"]["episodes"] == []


def test_a_rank_that_recovers_is_no_longer_named_and_its_episode_kept():
    # slow in blocks 1-4 (steps 5-20), even from step 21 on: after three even blocks
    # (steps 21-32) it is no longer named
    w0 = [0.08] * 20 + [0.05] * 16
    w1 = [0.02] * 20 + [0.05] * 16
    snap = run(job({0: w0, 1: w1}))
    assert "straggler" not in snap
    (episode,) = snap["comm"]["episodes"]
    assert (episode["rank"], episode["since_step"], episode["until_step"]) == (1, 5, 20)
    assert episode["active"] is False and episode["extra_s"] == pytest.approx(0.06)
    # one even block is not enough to stop naming it
    snap = run(job({0: w0[:28], 1: w1[:28]}))
    assert snap["straggler"]["rank"] == 1


def test_four_ranks_the_slow_one_against_the_median_of_the_others():
    # ranks 0, 1, 2 compute 0.020, 0.022, 0.018 s (noise); rank 3 computes 0.080 s
    # rank 3's excess: 0.080 - median(0.020, 0.022, 0.018) = 0.060
    waits = {0: [0.080] * 16, 1: [0.078] * 16, 2: [0.082] * 16, 3: [0.020] * 16}
    named = run(job(waits))["straggler"]
    assert named["rank"] == 3 and named["extra_s"] == pytest.approx(0.060)
    assert named["others"] == 3


def test_records_of_several_steps_and_a_grid_for_fast_steps():
    # 10 ms steps, one record every 5 steps: grid = 0.2 / 0.01 = 20 -> 32 steps a block
    dt = 0.01
    recs = [start(0.0)]
    for n in range(5, 5 * 41, 5):
        t = 1.0 + dt * n
        recs.append(comm(t, n, 5 * 0.007, 0, k=5))  # rank 0 waits 7 ms a step
        recs.append(comm(t, n, 5 * 0.002, 1, k=5))  # rank 1 waits 2 ms: computes 5 ms more
    snap = run(recs)
    assert snap["comm"]["window"]["block_steps"] == 32
    named = snap["straggler"]
    assert named["rank"] == 1 and named["extra_s"] == pytest.approx(0.005)
    assert named["since_step"] == 33  # blocks 33-64, 65-96, 97-128


def test_the_time_split_has_the_clock_ranks_waits_and_goodput_counts_them():
    # rank 0 (the clock) waits 0.08 s of each 0.1 s step, 0.01 s of it inside eval spans
    recs = job({0: [0.08] * 20, 1: [0.02] * 20}, with_steps=True)
    recs = [r if r["kind"] != "comm" or r["rank"] != 0 else
            comm(r["t"], r["d"]["n"], 0.08, 0, spans_s=0.01) for r in recs]
    snap = run(recs, end(4.0))
    parts = {p["name"]: p for p in snap["time"]["parts"]}
    # 20 records of 0.07 s outside spans: 1.4 s, the first (at the first step) before it
    assert parts["comm"]["s"] == pytest.approx(20 * 0.07)
    assert parts["comm"]["label"] == "Waiting for other ranks" and parts["comm"]["measured"]
    # window 1.1 .. 3.0 = 1.9 s, less the 19 waits in it: compute 1.9 - 1.33 = 0.57 s
    assert parts["compute"]["s"] == pytest.approx(1.9 - 19 * 0.07)
    assert sum(p["s"] for p in parts.values() if p["s"] is not None) == pytest.approx(4.0)
    # goodput: (compute + comm past the first step) / elapsed = 1.9 / 4.0
    assert snap["time"]["goodput"] == pytest.approx(1.9 / 4.0)
    names = [i["name"] for i in snap["explain"]["goodput"]["inputs"]]
    assert "comm_after_first_step_s" in names


def test_no_comm_part_for_one_process_and_a_reason_for_a_silent_job():
    snap = run(start(0.0), hello(0.1), [step(1.0 + i, 10) for i in range(5)], end(7.0))
    assert "comm" not in {p["name"] for p in snap["time"]["parts"]}
    assert "comm" not in snap and "straggler" not in snap["absent"]
    snap = run(start(0.0), hello(0.1, world_size=2), hello(0.1, world_size=2, rank=1),
               [step(1.0 + i, 10) for i in range(5)], end(7.0))
    assert "no rank reported its waits" in snap["absent"]["straggler"]
    parts = {p["name"]: p for p in snap["time"]["parts"]}
    assert parts["comm"]["measured"] is False  # two ranks: the wait is inside compute, said so
    assert "waiting for other ranks" in parts["compute"]["label"]


def test_the_waterfall_takes_the_wait_out_of_the_steps():
    # elapsed 12 s, startup 2 s: window 10 s of which compute 6 s, data 2 s, comm 2.5 s, of
    # which 0.5 s before the first step (outside the window): 2 s of waits in it
    time = {"elapsed_s": 12.0, "finished": True, "parts": [
        {"name": "startup", "s": 1.5, "measured": True},
        {"name": "data", "s": 2.0, "measured": True},
        {"name": "comm", "s": 2.5, "measured": True},
        {"name": "compute", "s": 6.0, "measured": False},
    ]}
    before, tail = {"comm": 0.5}, {}
    wf = waterfall.build(
        mfu={"value": 0.3, "convention": "titan"}, mfu_reason=None, counted=None, samples=None,
        ladder=None, ladder_reason="no GPU", ofu=None, gpus=None, tensor_clocks={}, time=time,
        time_reason=None, outside_phase_s=waterfall.phases_outside_window(time, before, tail),
        comm_outside_s=0.5,
    )
    factors = {f["name"]: f for f in wf["factors"]}
    assert factors["time_outside_window"]["value"] == pytest.approx(10.0 / 12.0)
    assert factors["time_outside_steps"]["value"] == pytest.approx(8.0 / 10.0)
    assert factors["comm_wait"]["value"] == pytest.approx(6.0 / 8.0)
    steps = [f["value"] for f in wf["factors"] if f["scope"] == "steps"]
    assert steps[0] * steps[1] * steps[-1] == pytest.approx(0.3)  # still telescopes to MFU
    assert factors["model_vs_executed"]["value"] == pytest.approx(0.3 / 0.6)


def test_a_slow_node_is_named_when_nodes_are_joined():
    # node 0: ranks 0, 1; node 1: ranks 2, 3, both computing 0.06 s more a step
    def detector(waits: dict[int, list[float]]) -> Stragglers:
        d = Stragglers()
        for n in range(1, 17):
            for r, w in waits.items():
                d.add(r, {"n": n, "k": 1, "s": w[n - 1]}, 1.0 + 0.1 * n)
        return d

    node0 = detector({0: [0.08] * 16, 1: [0.08] * 16})
    node1 = detector({2: [0.02] * 16, 3: [0.02] * 16})
    job_ = Stragglers.merged([node0, node1], {0: 0, 1: 0, 2: 1, 3: 1})
    comm_, named, _ = job_.snapshot(True, 4, 0)
    assert (named["kind"], named["node"], named["ranks"]) == ("node", 1, [2, 3])
    assert named["extra_s"] == pytest.approx(0.06) and named["others"] == 2
    # one slow rank on node 1: the rank is named, not its node
    node1 = detector({2: [0.02] * 16, 3: [0.08] * 16})
    _, named, _ = Stragglers.merged([node0, node1], {0: 0, 1: 0, 2: 1, 3: 1}).snapshot(True, 4, 0)
    assert (named["kind"], named["rank"]) == ("rank", 2)


def test_among_several_ranks_the_slow_one_must_stand_apart_from_the_others():
    # four ranks on a loaded machine: rank 3 computes 12 ms (12%) over the others' median, but
    # the others themselves are 6 ms apart (20, 23, 26 ms): 12 < 3 x 6, not an outlier
    waits = {0: [0.080] * 24, 1: [0.077] * 24, 2: [0.074] * 24, 3: [0.065] * 24}
    snap = run(job(waits))
    assert "straggler" not in snap and snap["comm"]["episodes"] == []
    # the same 12 ms with the others 1 ms apart (23, 23.5, 24): 12 > 3 x 1, named
    waits = {0: [0.077] * 24, 1: [0.0765] * 24, 2: [0.076] * 24, 3: [0.0645] * 24}
    named = run(job(waits))["straggler"]
    assert named["rank"] == 3 and named["extra_s"] == pytest.approx(0.012)
