"""Numbers that were wrong or missing: each case here failed before its fix.

Unknown is absent with its reason, never 0; the counters cover the GPUs MFU divides by; a
series logged on another rank than 0 is kept; an unmeasured data wait is not a measured 0;
no ETA once the run has ended; reasons name the real cause.
"""

from __future__ import annotations

import pytest

from .build import device, end, fact, gpu, gpu_row, hello, phase, rec, run, start, steps
from .test_budget import SHAPE
from .test_counters import h100_row


def idle_h100(index: int = 1, **extra):
    return h100_row(index, gpu_util=0.0, sm_active=0.0, tensor_active=0.0, dram_active=0.0,
                    sm_clock_mhz=345, **extra)


# ---- no agent: steps and tokens unknown, not 0 ----------------------------------------------


@pytest.mark.parametrize(
    "why",
    [
        [fact(0.1, "observe_only", "--no-agent: no agent was loaded", "detected")],
        [],  # tm attach, a non-Python command: nothing in the log says why
    ],
)
def test_without_an_agent_steps_and_tokens_are_absent_not_zero(why):
    snap = run(start(0.0, budget_steps=100), why, gpu(1.0, h100_row()), gpu(2.0, h100_row()),
               end(3.0))
    for key in ("steps", "tokens_seen", "tokens_per_s"):
        assert key not in snap, key
        assert "agent" in snap["absent"][key]
    assert "progress" not in snap and "agent" in snap["absent"]["progress"]
    assert "agent" in snap["absent"]["time_split"]
    assert "optimizer" not in snap["absent"]["time_split"]
    assert "agent" in snap["absent"]["counted"] and "flops probe" not in snap["absent"]["counted"]


def test_with_an_agent_and_no_step_yet_steps_are_zero():
    snap = run(start(0.0), hello(0.1, probes=("steps", "tokens")))
    assert snap["steps"] == 0 and snap["tokens_seen"] == 0


# ---- the counters cover the GPUs MFU divides by ----------------------------------------------


def busy_and_idle(selected_by: str = "all"):
    # The training runs on GPU 0 (its device fact); the sampler could not tie processes to GPUs
    # and watches both. hf 5,831,346,816 FLOP/token x 50,000 tok/s on 1 H100 (989.5e12):
    # MFU = 2.915673408e14 / 989.5e12 = 0.29466
    # GPU 0: OFU 0.5 x 1464 / 1830 = 0.4; GPU 1 idle: 0. Over GPU 0 alone OFU is 0.4; averaged
    # with the idle GPU it read 0.2, below MFU - 0.05: a false mfu_impossible alert.
    # Energy: GPU 0 100 -> 700 J (600 J), GPU 1 10 -> 40 J (30 J): 600 J over 300,000 tokens
    return run(
        start(0.0, convention="hf", **SHAPE),
        hello(0.1),
        device(0.2, index=0),
        steps(1.0, 1.0, 6, tokens=50_000),
        gpu(2.0, h100_row(0, energy_j=100.0), idle_h100(energy_j=10.0), selected_by=selected_by),
        gpu(3.0, h100_row(0, energy_j=700.0), idle_h100(energy_j=40.0), selected_by=selected_by),
    )


def test_ofu_observed_flops_and_energy_cover_the_training_gpus_only():
    snap = busy_and_idle()
    assert snap["n_gpus"] == {"value": 1, "source": "detected"}
    assert snap["mfu"]["value"] == pytest.approx(5_831_346_816 * 50_000 / 989.5e12)
    assert snap["mfu"]["value"] == pytest.approx(0.29466, rel=1e-4)
    assert snap["ofu"]["value"] == pytest.approx(0.4)  # not 0.2
    assert snap["ofu"]["gpus"] == ["0"]
    # 2 samples x 0.4 x 1 s x 989.5e12 = 7.916e14 (GPU 1 adds nothing; nor does it count)
    assert snap["flops_observed"]["value"] == pytest.approx(7.916e14)
    assert snap["energy"]["joules"] == 600.0 and snap["energy"]["per_gpu"] == {"0": 600.0}
    assert snap["energy"]["joules_per_token"] == pytest.approx(600 / 300_000)
    assert snap["ladder"]["covers"] == ["0"]
    assert snap["ladder"]["mean"]["ofu"] == pytest.approx(0.4)
    assert set(snap["ladder"]["gpus"]) == {"0", "1"}  # every sampled GPU is still shown
    assert "mfu" not in snap["ladder"]["gpus"]["1"]
    assert snap["mfu_ofu_gap"]["value"] == pytest.approx(0.4 - snap["mfu"]["value"])
    assert [a["kind"] for a in snap["alerts"]] == []  # no false mfu_impossible


def test_without_a_device_fact_every_sampled_gpu_is_covered_on_both_sides():
    # No device fact: MFU divides by both visible GPUs, so OFU is their mean: (0.4 + 0) / 2
    snap = run(
        start(0.0, convention="hf", **SHAPE), hello(0.1), steps(1.0, 1.0, 6, tokens=50_000),
        gpu(2.0, h100_row(0), idle_h100(), selected_by="all"),
    )
    assert snap["n_gpus"] == {"value": 2, "source": "assumed"}
    assert snap["ofu"]["value"] == pytest.approx(0.2)
    assert snap["mfu"]["value"] == pytest.approx(5_831_346_816 * 50_000 / (2 * 989.5e12))


def test_device_fact_after_the_samples_still_selects_the_gpus():
    snap = run(
        start(0.0, convention="hf", **SHAPE), hello(0.1), steps(1.0, 1.0, 6, tokens=50_000),
        gpu(2.0, h100_row(0), idle_h100()), device(2.5, index=0),
    )
    assert snap["ofu"]["value"] == pytest.approx(0.4)


# ---- series from the rank that logs them -----------------------------------------------------


def metric(t, key, value, rank):
    return rec("metric", t, rank=rank, src="emit", key=key, value=value, via="emit")


def test_a_loss_logged_on_the_last_rank_only_is_kept():
    # pipeline parallelism: the loss exists on the last stage (rank 3) only
    snap = run(start(0.0), hello(0.1, world_size=4), metric(1.0, "loss", 2.5, 3),
               metric(2.0, "loss", 2.4, 3))
    loss = snap["series"]["train_loss"]
    assert loss["value"] == 2.4 and loss["count"] == 2 and loss["rank"] == 3


def test_when_several_ranks_log_a_key_the_lowest_ranks_copy_is_kept():
    snap = run(start(0.0), metric(1.0, "loss", 9.0, 2), metric(2.0, "loss", 2.5, 0),
               metric(3.0, "loss", 9.5, 2), metric(4.0, "loss", 2.4, 0))
    loss = snap["series"]["train_loss"]
    assert (loss["value"], loss["count"], loss["rank"]) == (2.4, 2, 0)


# ---- data wait with no DataLoader iterated ---------------------------------------------------


def parts(snap):
    return {p["name"]: p for p in snap["time"]["parts"]}


def test_data_wait_without_a_dataloader_is_not_a_measured_zero():
    # nanoGPT's get_batch: the probe attached (torch imported) but no DataLoader ever iterated
    probes = ("steps", "tokens", "dataloader", "checkpoint", "eval")
    snap = run(start(0.0), hello(0.1, probes=probes), steps(1.0, 1.0, 5, tokens=100), end(6.0))
    data = parts(snap)["data"]
    assert data["measured"] is False and data["s"] is None
    assert "no DataLoader was iterated" in snap["absent"]["time.data"]
    assert "data wait" in parts(snap)["compute"]["label"]
    measured = run(start(0.0), hello(0.1, probes=probes), phase(0.5, "data", 0.1),
                   steps(1.0, 1.0, 5, tokens=100), end(6.0))
    assert parts(measured)["data"]["measured"] is True and parts(measured)["data"]["s"] == 0.1
    assert "time.data" not in measured["absent"]


# ---- ETA, FLOPs required, the plan's MFU, reasons --------------------------------------------


def test_no_eta_after_run_end():
    # 10 of 100 steps of 1,000 tokens: live ETA = 90,000 / 1,000 = 90 s; after run.end none
    live = run(start(0.0, budget_steps=100), hello(0.1), steps(1.0, 1.0, 10, tokens=1000))
    assert live["eta_s"] == pytest.approx(90)
    ended = run(start(0.0, budget_steps=100), hello(0.1), steps(1.0, 1.0, 10, tokens=1000),
                end(12.0))
    assert "eta_s" not in ended and ended["absent"]["eta_s"] == "the run has ended"
    assert ended["progress"] == pytest.approx(0.1)


def test_flops_required_and_remaining_absent_with_the_reason():
    snap = run(start(0.0, budget_tokens=1e6), hello(0.1), steps(1.0, 1.0, 6, tokens=1000))
    for key in ("flops_required", "flops_remaining"):
        assert key not in snap
        assert "FLOPs per token" in snap["absent"][key]
        assert "--params" in snap["absent"][key]  # what would enable it


def test_plans_measured_mfu_absent_with_the_reason():
    # a GPU that is not in the spec table: no peak, so no MFU to set beside the plan
    snap = run(start(0.0, plan_mfu=0.4, convention="hf", **SHAPE), hello(0.1),
               device(0.2, name="NVIDIA GeForce GT 1030"), steps(1.0, 1.0, 6, tokens=1000))
    assert snap["plan"]["mfu"]["measured"] is None
    assert "not in the spec table" in snap["absent"]["plan.mfu.measured"]


def test_step_time_reason_says_three_reports():
    snap = run(start(0.0), hello(0.1), steps(1.0, 1.0, 2))
    assert "three step reports" in snap["absent"]["step_time_s"]
    assert "step_time_s" in run(start(0.0), hello(0.1), steps(1.0, 1.0, 3))


def test_intensity_says_the_peak_is_missing_when_it_is():
    gt = "NVIDIA GeForce GT 1030"
    snap = run(start(0.0, convention="hf", **SHAPE), hello(0.1), device(0.2, name=gt),
               steps(1.0, 1.0, 6, tokens=1000),
               gpu(2.0, gpu_row(0, gt, dram_active=0.5)))
    reason = snap["absent"]["arithmetic_intensity"]
    assert reason.startswith("no dense peak") and "not in the spec table" in reason
    assert "chosen convention" not in reason


def test_mfu_over_100_percent_raises_the_alert_in_the_snapshot():
    # the 6028% case: a peak declared 1000x too low. hf 5,831,346,816 x 10,000 / 989.5e9 = 58.93
    snap = run(start(0.0, convention="hf", peak_flops=989.5e9, **SHAPE), hello(0.1),
               device(0.2), steps(1.0, 1.0, 6, tokens=10_000))
    assert snap["mfu"]["value"] == pytest.approx(58.93, rel=1e-4)
    (alert,) = [a for a in snap["alerts"] if a["kind"] == "mfu_impossible"]
    assert alert["mfu"] == snap["mfu"]["value"]


def test_on_the_fake_h100_fixture_ofu_and_energy_follow_the_training_gpu():
    # The fixture: two H100 SXM, the training on GPU 0, GPU 1 idle; the sampler cannot tie the
    # processes to GPUs, so it watches both ("all"). The training reports GPU 0 (device fact).
    # GPU 0's OFU: sample 2: 0.612 x min(1980, 1830) / 1830 = 0.612; sample 3: 0.7 x 1755 /
    # 1830 = 0.671311; moving average 0.612 + 0.2 x (0.671311 - 0.612) = 0.623862.
    # Energy of GPU 0: 982,501.567 - 981,234.567 = 1,267 J (GPU 1's 136 J are not the run's).
    # MFU: hf 5,831,346,816 x 80,000 / 989.5e12 = 0.47146; over both GPUs OFU read 0.311931,
    # below MFU - 0.05: the false mfu_impossible alert.
    import itertools

    from trainmeter.sources.gpu.families import backend_from_env
    from trainmeter.sources.gpu.sampler import GpuSampler

    from .build import REPO_FIXTURES

    env = {"TRAINMETER_FAKE_NVML": str(REPO_FIXTURES / "nvml" / "h100_sxm_gpm.json")}
    ticks = itertools.count(100.0, 0.5)
    sampler = GpuSampler(
        backend_from_env(env), env=env, tree_pids=lambda: [1], clock=lambda: next(ticks)
    )
    samples = []
    for i in range(3):
        d = sampler.sample()
        samples.append(rec("sample.gpu", 2.0 + i, rank=None, src="tm", **d))
    assert samples[-1]["d"]["selected_by"] == "all"
    uuid = samples[-1]["d"]["gpus"][0]["uuid"]
    training_gpu = {"name": "NVIDIA H100 80GB HBM3", "index": 0, "uuid": uuid}
    snap = run(
        start(0.0, convention="hf", **SHAPE), hello(0.1), fact(0.2, "device", training_gpu),
        steps(1.0, 1.0, 6, tokens=80_000), samples,
    )
    assert snap["n_gpus"]["value"] == 1
    assert snap["mfu"]["value"] == pytest.approx(0.47146, rel=1e-4)
    assert snap["ofu"]["value"] == pytest.approx(0.612 + 0.2 * (0.7 * 1755 / 1830 - 0.612))
    assert snap["ofu"]["value"] == pytest.approx(0.623862, rel=1e-5)
    assert snap["energy"]["joules"] == pytest.approx(1267.0)
    assert "mfu_impossible" not in [a["kind"] for a in snap["alerts"]]


def test_training_gpus_missing_from_the_samples_are_said():
    # the training reports GPUs 0 and 1; the sampler sees GPU 0 and GPU 7 only
    snap = run(
        start(0.0), hello(0.1), device(0.2, index=0), device(0.2, index=1, rank=1),
        gpu(2.0, h100_row(0), idle_h100(7), selected_by="all"),
    )
    assert snap["ofu"]["gpus"] == ["0"]
    assert any("only 1 of the 2 GPUs" in w for w in snap["warnings"])
    elsewhere = run(start(0.0), hello(0.1), device(0.2, index=3),
                    gpu(2.0, h100_row(0), idle_h100(1), selected_by="all"))
    assert elsewhere["ofu"]["gpus"] == ["0", "1"]
    assert any("none of the GPUs the training process reported" in w for w in elsewhere["warnings"])
