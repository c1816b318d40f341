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
    assert words[0] == "slow is 1.8x slower than fast in tokens/s"
    assert words[1].startswith("the biggest difference is data wait: slow spends 45 ms a step")
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
