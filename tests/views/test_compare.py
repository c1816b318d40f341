"""The comparison of two runs, on hand-made snapshots: per-step time by hand, MFU under one
convention, and the biggest difference named."""

from __future__ import annotations

import pytest

from trainmeter.views.compare import compare


def snap(steps: int, data_s: float, compute_s: float, tps: float, mfu_by: dict | None = None,
         conv: str = "megatron") -> dict:
    out = {
        "steps": steps,
        "tokens_per_s": tps,
        "step_time_s": (data_s + compute_s) / steps,
        "conventions": {"megatron": 1000.0, "hf": 800.0},
        "flops_per_token": {"value": 1000.0 if conv == "megatron" else 800.0, "convention": conv},
        "time": {"elapsed_s": 2.0 + data_s + compute_s, "goodput": compute_s / (2 + data_s + compute_s),
                 "parts": [{"name": "startup", "label": "Startup and compile", "s": 2.0},
                           {"name": "data", "label": "Data wait", "s": data_s},
                           {"name": "compute", "label": "Compute", "s": compute_s}]},
    }
    if mfu_by:
        out["mfu"] = {"value": mfu_by[conv], "convention": conv, "by_convention": mfu_by}
        out["ladder"] = {"mean": {"gpu_util": 0.9, "mfu": mfu_by[conv]}}
    return out


def rows(result: dict) -> dict:
    return {(r["section"], r["key"]): r for r in result["rows"]}


def test_data_wait_named_as_the_biggest_difference() -> None:
    a = snap(100, data_s=0.5, compute_s=5.0, tps=2000.0)  # 5 ms + 50 ms a step
    b = snap(100, data_s=4.5, compute_s=5.2, tps=1100.0)  # 45 ms + 52 ms a step
    result = compare(a, b, "fast", "slow")
    r = rows(result)
    assert r[("time_per_step", "data")]["a"] == pytest.approx(0.005)
    assert r[("time_per_step", "data")]["b"] == pytest.approx(0.045)
    assert r[("throughput", "tokens_per_s")]["ratio"] == pytest.approx(0.55)  # 1100 / 2000
    # FLOP/s under megatron: 2000 x 1000 and 1100 x 1000
    assert r[("throughput", "flops_per_s")]["a"] == 2.0e6
    assert r[("throughput", "flops_per_s")]["b"] == 1.1e6
    assert result["biggest"]["key"] == "data"
    # (45 - 5) ms of a 97 ms slower step: 41%
    assert result["biggest"]["share_of_step"] == pytest.approx(0.040 / 0.097)
    words = result["differences"]
    assert words[0] == "slow is 1.8× slower than fast in tokens/s"
    assert words[1].startswith("the biggest difference is data wait: slow spends 45.0 ms a step")
    assert not any("compute" in w for w in words)  # 2 ms of 97: too small to name


def test_mfu_is_compared_under_one_convention() -> None:
    a = snap(10, 0.1, 1.0, 100.0, {"megatron": 0.40, "hf": 0.32}, conv="megatron")
    b = snap(10, 0.1, 1.0, 100.0, {"megatron": 0.30, "hf": 0.24}, conv="hf")  # b chose hf
    result = compare(a, b)
    assert result["convention"] == "megatron"
    mfu = rows(result)[("mfu", "mfu")]
    assert (mfu["a"], mfu["b"]) == (0.40, 0.30)  # b's megatron value, not its hf 0.24
    assert "MFU (megatron): 40.0% for A, 30.0% for B" in result["differences"]
    assert rows(result)[("ladder", "mfu")]["b"] == 0.30  # the ladder's top rung: same convention


def test_same_runs_name_no_difference() -> None:
    a = snap(50, 0.1, 2.0, 500.0)
    result = compare(a, a)
    assert result["biggest"] is None
    assert result["differences"] == ["A and B run at about the same tokens/s"]
    assert rows(result)[("mfu", "mfu")]["a"] is None  # no peak: absent, not zero


def test_a_part_nobody_timed_reads_not_measured_never_zero() -> None:
    from trainmeter.cli.compare import render

    a = snap(100, 0.5, 5.0, 2000.0)
    b = snap(100, 0.5, 8.39, 1200.0)  # 83.9 ms a step: reads so, not "0.1s" beside 55 ms
    for s in (a, b):
        s["time"]["parts"].append({"name": "checkpoint", "label": "Checkpoints", "s": 0.0,
                                   "measured": False, "reason": "nothing was saved"})
    result = compare(a, b)
    row = rows(result)[("time_per_step", "checkpoint")]
    assert (row["a"], row["b"]) == (None, None)
    assert row["a_not_measured"] == row["b_not_measured"] == "nothing was saved"
    text = render(result)
    line = next(x for x in text.splitlines() if "Checkpoints" in x)
    assert line.split()[1:] == ["not", "measured", "not", "measured"]
    step = next(x for x in text.splitlines() if x.strip().startswith("Step time "))
    assert step.split()[2:] == ["55.0", "ms", "88.9", "ms", "×1.6"]  # 5.5 s and 8.89 s / 100; 1.616 as a factor
    assert " 0 ms" not in text
