"""Samples and FLOPs per step and per sample, for a model without tokens; MFU under `counted`."""

from __future__ import annotations

import math

import pytest

from .build import H100, device, end, fact, gpu, gpu_row, hello, run, start, steps

PER_RANK_FLOPS = 141_588_480  # the small CNN's counted step (tests/integration)


def cnn_run(*extra, declared=None):
    # two data-parallel ranks on two H100s; rank 0 steps every 0.5 s, no tokens in the batches
    return run(
        start(0.0, **(declared or {})),
        hello(0.1, world_size=2),
        device(0.2, index=0),
        device(0.2, index=1, rank=1),
        fact(0.3, "dp", 2),
        steps(1.0, 0.5, 10),
        fact(2.0, "samples_per_step", 16, note="leading dimension 16 x 1 micro-batch"),
        fact(2.5, "counted_flops_per_step", PER_RANK_FLOPS, "measured"),
        fact(2.5, "counted_unavailable", "no token tensor was seen", "measured"),
        *extra,
        end(6.0),
    )


def test_detected_samples_and_counted_flops_scale_by_dp():
    snap = cnn_run()
    s = snap["samples"]
    assert s["per_step"] == 32  # 16 on one rank x 2 ranks
    assert s["per_s"] == pytest.approx(64.0)  # 32 / 0.5 s
    assert s["flops_per_step"] == 2 * PER_RANK_FLOPS  # 283,176,960
    assert s["flops_per_sample"] == PER_RANK_FLOPS / 16  # 8,849,280
    # MFU (counted) = 283,176,960 FLOPs x 2 steps/s / (2 GPUs x 989.5e12) = 2.861819e-7
    assert s["mfu"]["value"] == pytest.approx(2.861819e-7, rel=1e-6)
    assert s["mfu"]["convention"] == "counted"
    assert snap["explain"]["samples_mfu"]["value"] == s["mfu"]["value"]
    assert snap["explain"]["samples_per_s"]["value"] == pytest.approx(64.0)
    # tokens: absent with the reason, never 0
    assert "tokens_seen" not in snap
    assert "token tensor" in snap["absent"]["tokens_seen"]
    assert "samples" in snap["absent"]["counted"]


def test_counted_flops_of_a_cycle_of_steps_say_which_steps():
    """A loop whose steps differ (D, D, G) is counted over one cycle (the agent's note, in the
    facts, names the steps): the figure's source says whole steps, not one."""
    note = "... over 2 whole steps ... (steps 7-8: one cycle of the loop ...)"
    snap = cnn_run(fact(2.6, "counted_flops_per_step", PER_RANK_FLOPS, "measured", note=note))
    s = snap["samples"]
    assert s["flops_per_step"] == 2 * PER_RANK_FLOPS
    assert s["flops_source"].startswith("counted (FlopCounterMode over whole steps")
    assert "one whole step" not in s["flops_source"]
    assert snap["facts"]["counted_flops_per_step"]["note"] == note


def test_declared_samples_and_flops_per_sample_are_taken_as_given():
    snap = cnn_run(declared={"samples_per_step": 64, "flops_per_sample": 1e6})
    s = snap["samples"]
    assert s["per_step"] == 64 and s["source"] == "declared"  # whole step: not x dp
    assert s["flops_per_step"] == 64e6  # 1e6 x 64
    assert s["flops_source"].startswith("declared")


def test_no_samples_no_counted_step_gives_reasons():
    snap = run(start(0.0), hello(0.1), steps(1.0, 0.5, 6), end(5.0))
    assert "samples" not in snap
    assert "--samples-per-step" in snap["absent"]["samples_per_s"]
    assert "--flops-per-sample" in snap["absent"]["flops_per_step"]


def test_waterfall_of_a_model_without_tokens_ends_at_the_counted_mfu():
    rows = [
        gpu_row(i, H100, gpu_util=0.5, sm_active=0.4, tensor_active=0.1, sm_clock_mhz=1830,
                max_sm_clock_mhz=1980)
        for i in (0, 1)
    ]
    snap = cnn_run(gpu(4.0, *rows))
    wf = snap["waterfall"]
    assert wf["convention"] == "counted"
    assert wf["value"] == snap["samples"]["mfu"]["value"]
    prod = math.prod(f["value"] for f in wf["factors"] if f["scope"] == "steps")
    assert prod == pytest.approx(wf["value"], rel=1e-12)
    # SM active 0.4, tensor share 0.1 / 0.4 = 0.25, clocks 1830 / 1830 = 1
    got = {f["name"]: f["value"] for f in wf["factors"]}
    assert got["gpu_idle"] == pytest.approx(0.4)
    assert got["tensor_share"] == pytest.approx(0.25)
    assert got["clocks"] == pytest.approx(1.0)
    assert got["model_vs_executed"] == pytest.approx(2.861819e-7 / 0.1, rel=1e-6)
