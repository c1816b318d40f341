"""A model without tokens under the real `tm`, and the data-wait advice with and without a slow
DataLoader (scripts/small_cnn.py: batches of 16 images 3x32x32, bf16 autocast on CPU).

Counted FLOPs of one training step, by hand (2 FLOPs a multiply-add, per image):
  conv1 3->16, 3x3, 32x32 out: 16*32*32 * 3*3*3  = 442,368 MACs -> 884,736 FLOPs
  conv2 16->32, 3x3, 16x16 out: 32*16*16 * 16*3*3 = 1,179,648 MACs -> 2,359,296 FLOPs
  linear 32->10: 320 MACs -> 640 FLOPs;                      forward 3,244,672
  backward: conv1 weight gradient only (its input needs none) 884,736, conv2 input and weight
  gradients 2 x 2,359,296, linear 2 x 640:                    backward 5,604,608
  per image 8,849,280; per step of 16 images 141,588,480
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from ..conftest import latest_summary, run_tm, tm_env

pytestmark = pytest.mark.slow
CNN = str(Path(__file__).parent / "scripts" / "small_cnn.py")
H100_FIXTURE = Path(__file__).parents[1] / "fixtures" / "nvml" / "h100_sxm_gpm.json"
# (SM active, tensor active, SM clock) of GPU 0 in h100_sxm_gpm.json's 2nd and 3rd samples
# (the 3rd repeats); GPU 1 reads 0 in both (GPM is a difference of two samples: none at the 1st)
H100_SAMPLES = {(0.925, 0.612, 1980), (0.95, 0.70, 1755)}
PER_SAMPLE = 8_849_280
PER_STEP = 16 * PER_SAMPLE
#: the CNN's run: past the rate's warm-up (3 intervals) with 26 measured; every number asserted
#: of it is per step or per sample, or a count equal to this (it was 100: 70 more of the same)
STEPS = 30


def test_cnn_gets_samples_flops_and_no_tokens(tmp_path) -> None:
    result = run_tm([CNN, str(STEPS), "0"], cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr
    s = latest_summary(tmp_path)
    assert s["steps"] == STEPS
    assert "tokens_seen" not in s and "token tensor" in s["absent"]["tokens_seen"]
    assert "0 tokens" not in result.stderr
    samples = s["samples"]
    assert samples["per_step"] == 16 and samples["source"] == "detected"
    assert samples["flops_per_step"] == PER_STEP
    assert samples["flops_per_sample"] == PER_SAMPLE
    # samples/s is samples per step over the measured step time
    assert samples["per_s"] == pytest.approx(16 / s["step_time_s"])
    # a CPU run: no peak, so no MFU and no waterfall, each with its reason
    assert "peak" in s["absent"]["samples_mfu"]
    assert s["absent"]["waterfall"].startswith("needs MFU")
    # the loader waited next to nothing: no advice about it
    assert s["facts"]["dataloader_workers"]["value"] == 0
    assert not [a for a in s["advice"] if a["kind"] == "data_wait"]


def test_slow_loader_on_the_fake_h100_gets_the_advice_and_a_waterfall(tmp_path) -> None:
    # each image waits 4 ms in __getitem__: 64 ms a batch, against a few ms of compute. The
    # fake H100 pair stands in for the GPUs (the model trains on the CPU): the waterfall ends
    # at the counted MFU (no tokens), every factor from the fixture's counters and the split
    env = tm_env(TRAINMETER_FAKE_NVML=str(H100_FIXTURE))
    result = run_tm([CNN, "30", "0.004"], cwd=tmp_path, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    s = latest_summary(tmp_path)
    parts = {p["name"]: p["s"] for p in s["time"]["parts"]}
    share = parts["data"] / (parts["data"] + parts["compute"])
    assert parts["data"] >= 30 * 16 * 0.004 * 0.9
    (advice,) = [a for a in s["advice"] if a["kind"] == "data_wait"]
    evidence = {e["name"]: e["value"] for e in advice["evidence"]}
    assert evidence["data_wait_share"] == pytest.approx(share)
    assert evidence["dataloader_workers"] == 0
    assert f"{share:.0%}" in advice["message"] and "0 DataLoader workers" in advice["message"]
    assert "num_workers" in advice["message"]

    wf = s["waterfall"]
    assert wf["convention"] == "counted" and wf["value"] == s["samples"]["mfu"]["value"]
    # the counted MFU: 141,588,480 FLOPs a step x steps/s over 2 H100s x 989.5e12
    assert wf["value"] == pytest.approx(PER_STEP / s["step_time_s"] / (2 * 989.5e12))
    row = s["gpus"]["0"]
    sm, tensor, clock = row["sm_active"], row["tensor_active"], row["sm_clock_mhz"]
    assert (sm, tensor, clock) in H100_SAMPLES
    assert s["gpus"]["1"]["sm_active"] == 0.0
    elapsed = s["time"]["elapsed_s"]
    # the data waits recorded before the first step (the first batch) are outside the window
    head = {i["name"]: i["value"] for i in wf["factors"][0]["inputs"]}
    outside = head["phases_outside_window"]
    assert 16 * 0.004 * 0.9 <= outside <= parts["data"]  # at least the first batch: 16 x 4 ms
    window = elapsed - parts["startup"] - parts["after"] - outside
    in_steps = parts["compute"] / window
    ofu = tensor * min(clock, 1830) / 1830 / 2  # mean over the two GPUs, tensor clock 1830
    expected = {
        "time_outside_window": window / elapsed,
        "time_outside_steps": in_steps,
        "gpu_idle": (sm / 2) / in_steps,  # mean SM active over GPUs, over the time in steps
        "tensor_share": (tensor / 2) / (sm / 2),
        "clocks": min(clock, 1830) / 1830,
        "model_vs_executed": wf["value"] / ofu,
    }
    got = {f["name"]: f["value"] for f in wf["factors"]}
    assert got == pytest.approx(expected, rel=1e-9)
    steps_product = math.prod(f["value"] for f in wf["factors"] if f["scope"] == "steps")
    assert steps_product == pytest.approx(wf["value"], rel=1e-12)
