"""MFU: convention named, peak dense and cited, declared or measured peaks labelled as such."""

from __future__ import annotations

import pytest

from .build import device, fact, gpu, gpu_row, hello, run, start, steps
from .test_budget import SHAPE

H100_PEAK = 989.5e12


def eight_h100s(**declared):
    """8 ranks on 8 H100 SXM; rank 0 sees 62,500 tokens a step, one step a second:
    62,500 x 8 ranks / 1 s = 500,000 tok/s."""
    return [
        start(0.0, **SHAPE, **declared),
        hello(0.1, world_size=8),
        *[device(0.2, index=i, rank=i) for i in range(8)],
        steps(1.0, 1.0, 6, tokens=62_500),
    ]


def test_the_same_run_spans_36_8_to_42_2_percent_by_convention():
    # The reference case: 8 x H100 SXM (989.5 TFLOP/s dense each) at 500,000 tok/s.
    # hf:         5,831,346,816 x 500,000 / (8 x 989.5e12) = 0.36833 -> 36.8%
    # megatron:   6,057,839,232 x 500,000 / 7.916e15       = 0.38263 -> 38.3%
    # titan:      6,284,331,648 x 500,000 / 7.916e15       = 0.39694 -> 39.7%
    # all_params: 6,686,984,832 x 500,000 / 7.916e15       = 0.42237 -> 42.2%
    snap = run(eight_h100s())
    assert snap["tokens_per_s"] == pytest.approx(500_000)
    mfu = snap["mfu"]
    assert mfu["convention"] == "not chosen"
    assert "value" not in mfu  # no convention chosen: a range, never a guess
    lo, hi = mfu["range"]
    assert (round(lo * 100, 1), round(hi * 100, 1)) == (36.8, 42.2)
    by = {k: round(v * 100, 1) for k, v in mfu["by_convention"].items()}
    assert by == {"hf": 36.8, "megatron": 38.3, "titan": 39.7, "all_params": 42.2}
    assert mfu["n_gpus"] == 8 and mfu["peak_label"] == "datasheet"
    assert "1,979" in mfu["peak_source"]  # the sparse line, halved, is cited
    assert snap["flops_per_token"]["range"] == [5_831_346_816.0, 6_686_984_832.0]


def test_chosen_convention_gives_one_value():
    snap = run(eight_h100s(convention="megatron"))
    assert snap["mfu"]["convention"] == "megatron"
    assert snap["mfu"]["value"] == pytest.approx(6_057_839_232 * 500_000 / (8 * H100_PEAK))
    assert snap["flops_per_token"]["formula"] == "6(N_act-E-R-V) + 6·H·Q·Σ_l T_l"
    # flops spent = 6,057,839,232 x 6 records x 62,500 x 8 = 6 x 500,000 tokens
    assert snap["flops_spent"] == pytest.approx(6_057_839_232 * 3_000_000)


def test_declared_flops_per_token():
    snap = run(eight_h100s(flops_per_token=7e9))
    assert snap["mfu"]["value"] == pytest.approx(7e9 * 5e5 / (8 * H100_PEAK))
    assert snap["mfu"]["convention"] == "declared value"


def test_declared_peak_is_labelled_and_cited():
    snap = run(eight_h100s(convention="hf", peak_flops=8e14, peak_source="vendor quote 2026"))
    peak = snap["peak"]
    assert (peak["label"], peak["source"], peak["bf16_dense_flops"]) == (
        "declared",
        "vendor quote 2026",
        8e14,
    )
    assert peak["ridge"] == pytest.approx(8e14 / 3350e9)  # bandwidth still from the datasheet
    assert snap["mfu"]["value"] == pytest.approx(5_831_346_816 * 5e5 / (8 * 8e14))
    assert snap["mfu"]["peak_label"] == "declared"


def test_measured_peak_fact_and_gpu_row_peak():
    snap = run(
        eight_h100s(convention="hf"), fact(3.0, "peak_flops", 7e14, "measured", note="measure_peak")
    )
    assert (snap["peak"]["label"], snap["peak"]["source"]) == ("measured", "measure_peak")
    row = gpu_row(0, measured_peak_flops=6.5e14, measured_peak_source="peak file 2026-01-01")
    snap = run(eight_h100s(convention="hf"), gpu(3.0, row))
    assert snap["peak"]["label"] == "measured"
    assert snap["peak"]["bf16_dense_flops"] == 6.5e14
    assert snap["peak"]["source"] == "peak file 2026-01-01"


def test_gb10_gets_no_mfu_unless_declared():
    base = [
        start(0.0, **SHAPE, convention="hf"),
        device(0.2, "NVIDIA GB10"),
        steps(1.0, 1.0, 6, 1000),
    ]
    snap = run(base)
    assert "mfu" not in snap and "peak" not in snap
    assert "no published dense BF16 peak" in snap["absent"]["mfu"]
    assert "--peak-tflops" in snap["absent"]["mfu"]
    declared = run(start(0.0, peak_flops=1e14), base[1:], base[0])
    assert declared["mfu"]["peak_label"] == "declared"
    # 5,831,346,816 x 1,000 tok/s / 1e14 = 0.0583
    assert declared["mfu"]["value"] == pytest.approx(0.05831346816)


def test_unknown_card_never_borrows_a_peak():
    snap = run(start(0.0, **SHAPE), device(0.2, "AMD Instinct MI350X"), steps(1.0, 1.0, 6, 1000))
    assert "mfu" not in snap
    assert "not in the spec table" in snap["absent"]["mfu"]


def test_mixed_gpus_are_refused():
    snap = run(
        start(0.0, **SHAPE),
        hello(0.1, world_size=2),
        device(0.2, index=0, rank=0),
        device(0.2, "NVIDIA A100-SXM4-80GB", index=1, rank=1),
        steps(1.0, 1.0, 6, 1000),
    )
    assert "mfu" not in snap
    assert "different models" in snap["absent"]["mfu"]


def test_gpus_from_the_sampler_are_assumed_with_a_warning():
    snap = run(
        start(0.0, **SHAPE, convention="hf"),
        gpu(0.5, gpu_row(0), gpu_row(1), selected_by="all"),
        steps(1.0, 1.0, 6, 1000),
    )
    assert snap["n_gpus"] == {"value": 2, "source": "assumed"}
    assert any("did not report its GPUs" in w for w in snap["warnings"])
    assert snap["mfu"]["n_gpus"] == 2


def test_mfu_absent_reasons():
    no_shape = run(start(0.0), device(0.2), steps(1.0, 1.0, 6, 1000))
    assert "--layers" in no_shape["absent"]["mfu"]
    no_rate = run(start(0.0, **SHAPE), device(0.2), steps(1.0, 1.0, 2, 1000))
    assert "tokens/s" in no_rate["absent"]["mfu"]
    no_device = run(start(0.0, **SHAPE), steps(1.0, 1.0, 6, 1000))
    assert "unknown" in no_device["absent"]["mfu"]


def test_counted_is_beside_mfu_never_in_its_place():
    # counted 7.5e9 FLOP/token vs hf 5,831,346,816 -> 1.2862 x; utilization at 500k tok/s:
    # 7.5e9 x 5e5 / 7.916e15 = 0.47372
    snap = run(
        eight_h100s(convention="hf"), fact(3.0, "counted_flops_per_token", 7.5e9, "measured")
    )
    assert snap["mfu"]["convention"] == "hf"
    assert snap["counted"]["utilization"] == pytest.approx(7.5e9 * 5e5 / (8 * H100_PEAK))
    assert snap["counted"]["against_conventions"]["hf"] == pytest.approx(7.5e9 / 5_831_346_816)
    assert snap["counted"]["convention"] == "counted"
