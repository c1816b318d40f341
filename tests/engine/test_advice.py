"""Advice: each rule fires on its measured number, carries it, and stays silent without it."""

from __future__ import annotations

import pytest

from trainmeter.engine import advice

from .build import H100, device, end, fact, gpu, gpu_row, hello, phase, rec, run, start, steps


def kinds(snap):
    return [a["kind"] for a in snap["advice"]]


def loop(*extra, data_s=0.5, workers=None):
    """Steps every 1 s from t=1 to t=9 (window 8 s), a data wait of `data_s` inside it."""
    recs = [start(0.0), hello(0.1, probes=("steps", "dataloader", "eval", "checkpoint"))]
    if workers is not None:
        recs.append(fact(0.2, "dataloader_workers", workers))
    recs += [steps(1.0, 1.0, 9, 100), phase(4.5, "data", data_s), *extra, end(10.0)]
    return run(*recs)


def test_data_wait_with_few_workers_is_advised_with_its_share():
    # window 8 s, data 2 s inside it: compute 6 s; share = 2 / (6 + 2) = 25%
    snap = loop(data_s=2.0, workers=0)
    (item,) = snap["advice"]
    assert item["kind"] == "data_wait"
    ev = {e["name"]: e["value"] for e in item["evidence"]}
    assert ev["data_wait_share"] == pytest.approx(0.25)
    assert ev["data_wait_s"] == pytest.approx(2.0)
    assert ev["dataloader_workers"] == 0
    assert "25%" in item["message"] and "0 DataLoader workers" in item["message"]


def test_data_wait_with_many_workers_points_at_storage_instead():
    snap = loop(data_s=2.0, workers=16)
    assert "16 workers" in snap["advice"][0]["message"]
    assert "storage" in snap["advice"][0]["message"]


def test_small_data_wait_gives_no_advice():
    # 0.5 / (7.5 + 0.5) = 6.25% < 10%
    snap = loop(data_s=0.5, workers=0)
    assert snap["advice"] == []


def test_low_tensor_share_with_busy_sms():
    # SM active 0.9, tensor active 0.3: share 0.333 < 0.5
    row = gpu_row(0, H100, gpu_util=1.0, sm_active=0.9, tensor_active=0.3, sm_clock_mhz=1830,
                  max_sm_clock_mhz=1980)
    snap = loop(device(0.3), gpu(5.0, row))
    (item,) = [a for a in snap["advice"] if a["kind"] == "non_tensor_work"]
    ev = {e["name"]: e["value"] for e in item["evidence"]}
    assert ev["tensor_share"] == pytest.approx(1 / 3)
    assert "33%" in item["message"] and "90% SM active" in item["message"]
    row["tensor_active"] = 0.6  # share 0.667: no advice
    assert "non_tensor_work" not in kinds(loop(device(0.3), gpu(5.0, row)))


def test_clocks_held_by_power_name_the_reason_and_the_clock():
    row = gpu_row(0, H100, gpu_util=1.0, sm_clock_mhz=1400, max_sm_clock_mhz=1980,
                  throttle=["hw_power_brake"])
    snap = loop(device(0.3), gpu(5.0, row))
    (item,) = [a for a in snap["advice"] if a["kind"] == "clocks_held"]
    assert "hw_power_brake" in item["message"] and "1400 of 1980 MHz (71%)" in item["message"]
    row["throttle"] = []
    assert "clocks_held" not in kinds(loop(device(0.3), gpu(5.0, row)))


def test_step_times_alone_give_no_slow_rank_advice():
    # rank 0 steps every 1.0 s, rank 1 every 1.25 s: no compute/wait split, no advice (the
    # advice from a named straggler: tests/engine/test_stragglers.py)
    slow = [rec("step", 1.0 + i * 1.25, rank=1, k=1) for i in range(9)]
    assert "slow_rank" not in kinds(loop(slow))


def test_padding_share():
    # 1000 tokens a step of which 700 real: padding 30%
    snap = run(start(0.0), steps(1.0, 1.0, 6, 1000, real_tokens=700), end(7.0))
    (item,) = snap["advice"]
    assert item["kind"] == "padding" and "30%" in item["message"]


def test_eval_and_checkpoints_taking_a_large_share():
    # elapsed 10 s: eval 1.5 s (15%), checkpoint 0.5 s (5%: no advice)
    snap = loop(phase(6.5, "eval", 1.5, n=3), phase(7.5, "checkpoint", 0.5))
    assert kinds(snap) == ["eval"]
    assert "15%" in snap["advice"][0]["message"] and "3 times" in snap["advice"][0]["message"]


def test_large_shares_of_a_short_run_are_not_worth_advice():
    # steps every 0.1 s from t=1 (window 0.8 s): data 0.2 s is 25% of compute + data and an
    # eval of 0.5 s is 42% of the 1.2 s run, but neither is a second: no advice. The same
    # shares a second or more long are advised (the loop above), so the seconds decide here
    recs = [start(0.0), hello(0.05, probes=("steps", "dataloader", "eval")),
            fact(0.06, "dataloader_workers", 0), steps(0.3, 0.1, 9, 100),
            phase(0.6, "data", 0.2), phase(0.7, "eval", 0.5), end(1.2)]
    snap = run(*recs)
    parts = {p["name"]: p["s"] for p in snap["time"]["parts"]}
    assert parts["data"] == pytest.approx(0.2) and parts["eval"] == pytest.approx(0.5)
    assert snap["advice"] == []
    assert advice.MIN_WORTH_S == 1.0


def test_no_numbers_no_advice():
    assert advice.advise() == []
    assert run(start(0.0), steps(1.0, 1.0, 4, 100), end(5.0))["advice"] == []
