"""The MFU waterfall, each factor against a value worked out by hand.

The GPU rows carry the counters of the fake-GPU fixtures (tests/fixtures/nvml/): the H100 the
training runs on (h100_sxm_gpm.json, GPU 0's latest sample: GPU-Util 98%, GPM SM active 95.0%,
tensor active 70.0%, SM clock 1755 MHz of 1980) and the A100 without GPM (a100_no_gpm.json:
GPU-Util 100%, SM clock 1410 MHz).

The run, the same in every test: start at t=0, steps every 1 s from t=1 to t=6 at 10,000
tokens each (tokens/s = 10,000), a 0.1 s data wait at t=3.5, the end at t=8.
  time split: startup 1 s (0 -> first step), window 1 -> 6 = 5 s of which data 0.1, so
  compute 4.9 s, after 2 s; elapsed 8 s.
  window / elapsed = 5 / 8 = 0.625 (the whole-run factor); compute / window = 4.9 / 5 = 0.98.
  MFU (hf, 5,831,346,816 FLOP/token, one GPU): 5.831346816e13 / peak.
"""

from __future__ import annotations

import math

import pytest

from .build import H100, device, end, gpu, gpu_row, hello, phase, run, start, steps
from .test_budget import SHAPE

A100_80 = "NVIDIA A100-SXM4-80GB"
A100_40 = "NVIDIA A100-SXM4-40GB"
FLOP_PER_S = 5_831_346_816 * 10_000
WINDOW = 5 / 8
IN_STEPS = 4.9 / 5


def a_run(*samples, name=H100):
    return run(
        start(0.0, **SHAPE, convention="hf"),
        hello(0.1, probes=("steps", "dataloader")),
        device(0.2, name=name),
        steps(1.0, 1.0, 3, 10_000),
        phase(3.5, "data", 0.1),
        steps(4.0, 1.0, 3, 10_000),
        *samples,
        end(8.0),
    )


def h100_fixture_row():
    return gpu_row(
        0, H100, gpu_util=0.98, sm_active=0.95, tensor_active=0.70, sm_clock_mhz=1755,
        max_sm_clock_mhz=1980, window_s=1.0,
    )


def factors(wf):
    return {f["name"]: f["value"] for f in wf["factors"]}


def in_steps_product(wf):
    return math.prod(f["value"] for f in wf["factors"] if f["scope"] == "steps")


def test_h100_with_gpm_every_factor_by_hand():
    snap = a_run(gpu(5.0, h100_fixture_row()))
    mfu = FLOP_PER_S / 989.5e12  # = 0.058932
    assert snap["mfu"]["value"] == pytest.approx(mfu)
    wf = snap["waterfall"]
    got = factors(wf)
    ofu = 0.70 * 1755 / 1830  # tensor active x SM clock / tensor clock (1830) = 0.671311
    assert list(got) == [
        "time_outside_window", "time_outside_steps", "gpu_idle", "tensor_share", "clocks",
        "model_vs_executed",
    ]
    assert got["time_outside_window"] == pytest.approx(0.625)  # window 5 s / elapsed 8 s
    assert got["time_outside_steps"] == pytest.approx(0.98)  # compute 4.9 s / window 5 s
    assert got["gpu_idle"] == pytest.approx(0.95 / 0.98)  # SM active over time in steps: 0.969388
    assert got["gpu_idle"] == pytest.approx(0.969388, abs=1e-6)
    assert "SM active" in wf["factors"][2]["label"]
    assert got["tensor_share"] == pytest.approx(0.70 / 0.95)  # 0.736842
    assert got["clocks"] == pytest.approx(1755 / 1830)  # 0.959016
    assert got["model_vs_executed"] == pytest.approx(mfu / ofu)  # 0.058932 / 0.671311 = 0.087787
    assert got["model_vs_executed"] == pytest.approx(0.087787, abs=1e-6)
    # the in-steps factors multiply to the snapshot's MFU exactly; with the time factor in
    # front, to the whole run's share of the peak
    assert in_steps_product(wf) == pytest.approx(snap["mfu"]["value"], rel=1e-12)
    assert wf["value"] == snap["mfu"]["value"]
    assert wf["convention"] == "hf"
    assert math.prod(got.values()) == pytest.approx(WINDOW * mfu, rel=1e-12)
    assert wf["whole_run"]["value"] == pytest.approx(0.625 * mfu)
    assert wf["absent"] == {}
    sources = {f["name"]: f["source"] for f in wf["factors"]}
    assert sources["gpu_idle"].startswith("measured") and "GPM" in sources["gpu_idle"]
    assert sources["model_vs_executed"].startswith("derived")
    assert snap["explain"]["waterfall"]["value"] == snap["mfu"]["value"]
    assert snap["explain"]["waterfall"]["peak_source"] == snap["peak"]["source"]


def test_a100_without_gpm_idle_is_gpu_util_and_the_missing_steps_merge():
    row = gpu_row(0, A100_80, gpu_util=1.0, sm_clock_mhz=1410, max_sm_clock_mhz=1410)
    snap = a_run(gpu(5.0, row), name=A100_80)
    mfu = FLOP_PER_S / 312e12  # = 0.186902
    assert snap["mfu"]["value"] == pytest.approx(mfu)
    wf = snap["waterfall"]
    got = factors(wf)
    assert list(got) == [
        "time_outside_window", "time_outside_steps", "gpu_idle", "model_vs_executed",
    ]
    assert got["time_outside_window"] == pytest.approx(0.625)
    assert got["time_outside_steps"] == pytest.approx(0.98)
    # GPU-Util 100% over a window that spent 98% in steps: 1 / 0.98 = 1.020408, above 1 and
    # kept so, with its reason (GPU-Util counts any kernel running, through the data wait too)
    assert got["gpu_idle"] == pytest.approx(1.020408, abs=1e-6)
    assert "data wait" in wf["factors"][2]["above_one"]
    assert "GPU-Util" in wf["factors"][2]["label"] and "no GPM" in wf["factors"][2]["label"]
    # no tensor counter, and the A100 80GB's spec states no tensor clock: both are absent with
    # their reasons, and the last factor carries them: MFU / 1.0 = 0.186902
    assert set(wf["absent"]) == {"tensor_share", "clocks"}
    assert "GPM" in wf["absent"]["tensor_share"]
    assert "tensor clock" in wf["absent"]["clocks"]
    assert got["model_vs_executed"] == pytest.approx(mfu)
    assert wf["factors"][-1]["merged"] == ["tensor_share", "clocks"]
    assert in_steps_product(wf) == pytest.approx(snap["mfu"]["value"], rel=1e-12)


def a100_rows():
    # A100 SXM4 40GB: tensor clock 1410 MHz. GPU 0 at util 0.9 and 1200 MHz, GPU 1 at util 0.5
    # and 1410 MHz; no GPM
    return (
        gpu_row(0, A100_40, gpu_util=0.9, sm_clock_mhz=1200, max_sm_clock_mhz=1410),
        gpu_row(1, A100_40, gpu_util=0.5, sm_clock_mhz=1410, max_sm_clock_mhz=1410),
    )


def test_without_gpm_the_clock_factor_weighs_each_gpu_by_its_util():
    # Both GPUs are the training's (rank 0 reports GPU 0, rank 1 GPU 1), so MFU divides by 2
    # GPUs and the counters cover both:
    # clocks = (0.9 x 1200/1410 + 0.5 x 1) / (0.9 + 0.5) = (0.765957 + 0.5) / 1.4 = 0.904255
    snap = run(
        start(0.0, **SHAPE, convention="hf"),
        hello(0.1, probes=("steps", "dataloader")),
        device(0.2, name=A100_40),
        device(0.2, name=A100_40, index=1, rank=1),
        steps(1.0, 1.0, 3, 10_000),
        phase(3.5, "data", 0.1),
        steps(4.0, 1.0, 3, 10_000),
        gpu(5.0, *a100_rows()),
        end(8.0),
    )
    assert snap["mfu"]["n_gpus"] == 2 and snap["ladder"]["covers"] == ["0", "1"]
    wf = snap["waterfall"]
    got = factors(wf)
    # mean GPU-Util (0.9 + 0.5) / 2 = 0.7, over the time in steps: 0.7 / 0.98 = 0.714286
    assert got["gpu_idle"] == pytest.approx(0.714286, abs=1e-6)
    assert got["clocks"] == pytest.approx(0.904255, abs=1e-6)
    mfu = snap["mfu"]["value"]
    assert got["model_vs_executed"] == pytest.approx(mfu / (0.7 * 0.904255), rel=1e-5)
    assert wf["factors"][-1]["merged"] == ["tensor_share"]
    assert in_steps_product(wf) == pytest.approx(mfu, rel=1e-12)


def test_a_gpu_the_training_does_not_use_is_left_out_as_mfu_leaves_it_out():
    # The training reports only GPU 0 (matched by UUID), so MFU divides by 1 GPU; GPU 1 is
    # sampled but not the training's, so no factor may count it (the chain must end at an MFU
    # over the same GPUs):
    #   gpu_idle = GPU 0's util / time in steps = 0.9 / 0.98 = 0.918367 (not (0.9+0.5)/2/0.98)
    #   clocks   = 0.9 x 1200/1410 / 0.9 = 1200/1410 = 0.851064 (not 0.904255)
    snap = a_run(gpu(5.0, *a100_rows()), name=A100_40)
    assert snap["mfu"]["n_gpus"] == 1 and snap["ladder"]["covers"] == ["0"]
    assert set(snap["gpus"]) == {"0", "1"}  # both still listed
    wf = snap["waterfall"]
    got = factors(wf)
    assert got["gpu_idle"] == pytest.approx(0.918367, abs=1e-6)
    assert got["clocks"] == pytest.approx(0.851064, abs=1e-6)
    mfu = snap["mfu"]["value"]
    assert got["model_vs_executed"] == pytest.approx(mfu / (0.9 * 0.851064), rel=1e-5)
    assert in_steps_product(wf) == pytest.approx(mfu, rel=1e-12)


def test_a_factor_above_one_is_kept_with_its_reason():
    # tensor active 0.05 at 1755 MHz: OFU = 0.05 x 1755 / 1830 = 0.0479508, below the MFU
    # 0.0589323: model vs executed = 0.0589323 / 0.0479508 = 1.229015, not clipped to 1
    row = h100_fixture_row()
    row["tensor_active"] = 0.05
    snap = a_run(gpu(5.0, row))
    last = snap["waterfall"]["factors"][-1]
    assert last["name"] == "model_vs_executed"
    assert last["value"] == pytest.approx(1.229015, abs=1e-6)
    assert "convention" in last["above_one"]
    assert in_steps_product(snap["waterfall"]) == pytest.approx(snap["mfu"]["value"], rel=1e-12)


def test_a_cpu_run_has_no_waterfall_and_says_why():
    snap = run(
        start(0.0, **SHAPE, convention="hf"),
        hello(0.1),
        steps(1.0, 1.0, 6, 10_000),
        end(8.0),
    )
    assert "waterfall" not in snap
    assert snap["absent"]["waterfall"].startswith("needs MFU: ")
    assert "peak" in snap["absent"]["waterfall"]


def test_no_convention_gives_no_waterfall_but_a_reason():
    snap = run(start(0.0, **SHAPE), hello(0.1), device(0.2), steps(1.0, 1.0, 6, 10_000), end(8.0))
    assert "range" in snap["mfu"]
    assert "--convention" in snap["absent"]["waterfall"]


def test_no_gpu_sample_leaves_only_time_and_the_merged_factor():
    # a declared peak on a GPU nobody samples: every counter step is absent and merged
    snap = a_run()
    wf = snap["waterfall"]
    names = [f["name"] for f in wf["factors"]]
    assert names == ["time_outside_window", "time_outside_steps", "model_vs_executed"]
    assert set(wf["absent"]) == {"gpu_idle", "tensor_share", "clocks"}
    assert wf["factors"][-1]["value"] == pytest.approx(snap["mfu"]["value"] / 0.98)
    assert in_steps_product(wf) == pytest.approx(snap["mfu"]["value"], rel=1e-12)


def test_an_eval_after_the_last_step_is_outside_the_window():
    # probes for data and eval; steps 1..6, a 1 s eval recorded at t=7 (after the last step),
    # end at 8: startup 1, eval 1 (tail), after 8 - 6 - 1 = 1; window = 8 - 1 - 1 - 1 = 5 s,
    # all compute: window / elapsed = 5 / 8, compute / window = 1
    snap = run(
        start(0.0, **SHAPE, convention="hf"),
        hello(0.1, probes=("steps", "dataloader", "eval")),
        device(0.2),
        steps(1.0, 1.0, 6, 10_000),
        phase(7.0, "eval", 1.0),
        gpu(5.0, h100_fixture_row()),
        end(8.0),
    )
    got = factors(snap["waterfall"])
    assert got["time_outside_window"] == pytest.approx(0.625)
    assert got["time_outside_steps"] == pytest.approx(1.0)
    assert got["gpu_idle"] == pytest.approx(0.95)


def test_a_fault_in_the_waterfall_leaves_the_snapshot_whole(monkeypatch):
    from trainmeter.engine import waterfall

    def broken(*args, **kwargs):
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(waterfall, "build", broken)
    snap = a_run(gpu(5.0, h100_fixture_row()))
    assert "waterfall" not in snap and "boom" in snap["absent"]["waterfall"]
    assert snap["mfu"]["value"] > 0 and isinstance(snap["advice"], list)
