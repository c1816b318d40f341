"""`snap["explain"]`: every derived number with its formula, inputs, units and provenance, so a
person can redo it by hand. Each formula is put back together from its own inputs here, and
each value is pinned against the arithmetic written out below."""

from __future__ import annotations

import math

import pytest

from .build import device, fact, gpu, hello, phase, run, start, step
from .test_budget import SHAPE
from .test_counters import h100_row

NAMES = (
    "tokens_per_s", "step_time_s", "flops_per_token", "mfu", "ofu", "arithmetic_intensity",
    "flops_observed", "energy_per_token", "progress", "eta_s", "goodput", "plan",
)
ENTRY_KEYS = {"value", "unit", "formula", "inputs", "convention", "peak_source", "note"}
INPUT_KEYS = {"name", "value", "unit", "source"}

# The run, worked by hand:
# - 10,000 tokens a step; rank 0 reports steps at t = 1, 2, 3, 4, 5 and 6.5 (the last one slow)
# - tokens/s, live (the run has not ended): the trailing 30 s window, here all of the run after
#   warm-up (the first 3 intervals): t = 4 to 6.5, 2 steps, 20,000 tokens / 2.5 s = 8,000 tok/s
TPS = 20_000 / 2.5
# - step time over the same window: 2.5 s / 2 steps = 1.25 s
STEP_TIME = 1.25
# - FLOPs per token, hf: 6(N - E) = 6 x (1,039,000,000 - 67,108,864) = 5,831,346,816
FPT = 5_831_346_816
# - MFU on 1 H100 SXM (989.5 TFLOP/s dense): 5,831,346,816 x 8,000 = 4.66508e13; / 989.5e12 = 0.0471458
MFU = FPT * TPS / 989.5e12
# - OFU: tensor active 0.5 at 1464 MHz, tensor clock 1830 MHz: 0.5 x 1464 / 1830 = 0.4
# - observed FLOPs: 2 samples x 0.4 x 1 s x 989.5e12 = 7.916e14
# - intensity: 989.5e12 x 0.0471458 / (3.35e12 B/s x DRAM active 0.5) = 27.85 FLOP/byte
INTENSITY = 989.5e12 * MFU / (3350e9 * 0.5)
# - energy: 400 - 100 = 300 J over 60,000 tokens = 0.005 J/token
# - progress: 60,000 of 1e6 tokens = 0.06; ETA: 940,000 / 8,000 = 117.5 s
ETA = 940_000 / TPS
# - time at now = 7: elapsed 7 s; data waits 0.2 s before the first step (t = 0.9) and 0.5 s
#   after it (t = 3.5); compute = 7 - 1 - (0.7 - 0.2) = 5.5 s; goodput = (5.5 + 0.5) / 7 = 6/7
# - plan: planned tokens/s = 0.4 x 1 x 989.5e12 / 5,831,346,816 = 67,874.6;
#   projected hours = (7 + 117.5) / 3600 = 0.034583 h
PLANNED_TPS = 0.4 * 989.5e12 / FPT


def live_run(now: float = 7.0) -> dict:
    return run(
        start(0.0, budget_tokens=1e6, plan_mfu=0.4, plan_hours=2, convention="hf", **SHAPE),
        hello(0.1, probes=("steps", "tokens", "dataloader", "checkpoint", "eval")),
        device(0.5),
        phase(0.9, "data", 0.2),
        [step(t, 10_000) for t in (1.0, 2.0, 3.0, 4.0, 5.0, 6.5)],
        phase(3.5, "data", 0.5),
        gpu(2.0, h100_row(energy_j=100.0)),
        gpu(3.0, h100_row(energy_j=400.0)),
        now=now,
    )


def redo(entry: dict) -> float:
    """Put each input's value in place of its name in the formula, as a person would."""
    names = {i["name"]: i["value"] for i in entry["inputs"]}
    return eval(entry["formula"], {"__builtins__": {}, "min": min, "max": max}, names)  # noqa: S307


def test_every_derived_number_is_explained_and_redone_from_its_inputs():
    snap = live_run()
    explain = snap["explain"]
    assert set(NAMES) <= set(explain)
    for name, entry in explain.items():
        assert set(entry) <= ENTRY_KEYS and {"value", "unit", "formula", "inputs"} <= set(entry)
        assert isinstance(entry["formula"], str) and entry["unit"]
        for given in entry["inputs"]:
            assert set(given) == INPUT_KEYS, (name, given)
            assert given["name"].isidentifier() and given["source"] and given["unit"]
        assert redo(entry) == pytest.approx(entry["value"], rel=1e-9), name


def test_explained_values_are_the_snapshot_numbers_and_the_hand_worked_ones():
    snap = live_run()
    explain = {k: v["value"] for k, v in snap["explain"].items()}
    assert explain["tokens_per_s"] == pytest.approx(snap["tokens_per_s"]) == pytest.approx(TPS)
    assert TPS == 8_000
    assert explain["step_time_s"] == snap["step_time_s"] == pytest.approx(STEP_TIME)
    assert explain["flops_per_token"] == snap["flops_per_token"]["value"] == FPT
    assert explain["mfu"] == snap["mfu"]["value"] == pytest.approx(0.0471458, rel=1e-5)
    assert explain["mfu"] == pytest.approx(MFU)
    assert explain["ofu"] == snap["ofu"]["value"] == pytest.approx(0.4)
    assert explain["flops_observed"] == snap["flops_observed"]["value"] == pytest.approx(7.916e14)
    assert explain["arithmetic_intensity"] == pytest.approx(INTENSITY)
    assert INTENSITY == pytest.approx(27.85, rel=1e-3)
    assert explain["energy_per_token"] == snap["energy"]["joules_per_token"] == pytest.approx(0.005)
    assert explain["progress"] == snap["progress"] == pytest.approx(0.06)
    assert explain["eta_s"] == snap["eta_s"] == pytest.approx(ETA)
    assert ETA == 117.5
    assert explain["goodput"] == snap["time"]["goodput"] == pytest.approx(6 / 7)
    assert (
        explain["plan"]
        == snap["plan"]["tokens_per_s"]["planned"]
        == pytest.approx(67_874.6, rel=1e-6)
    )
    assert explain["plan_hours"] == snap["plan"]["hours"]["projected"]
    assert explain["plan_hours"] == pytest.approx((7 + ETA) / 3600)


def test_mfu_names_its_inputs_convention_and_datasheet_line():
    entry = live_run()["explain"]["mfu"]
    assert entry["formula"] == "flops_per_token * tokens_per_s / (n_gpus * peak_flops)"
    assert entry["convention"] == "hf"
    assert entry["unit"] == "fraction"
    given = {i["name"]: i for i in entry["inputs"]}
    assert given["peak_flops"]["value"] == 989.5e12
    assert given["peak_flops"]["unit"] == "FLOP/s per GPU"
    assert given["peak_flops"]["source"].startswith("datasheet")
    assert given["n_gpus"]["value"] == 1 and given["n_gpus"]["source"].startswith("detected")
    assert "1,979" in entry["peak_source"]  # the datasheet line the dense peak is read from


def test_flops_per_token_formula_is_the_conventions_with_the_shapes_provenance():
    entry = live_run()["explain"]["flops_per_token"]
    assert entry["formula"] == "6 * (N - E)"
    given = {i["name"]: i for i in entry["inputs"]}
    assert given["N"]["value"] == 1_039_000_000 and given["E"]["value"] == 32768 * 2048
    assert given["N"]["source"].startswith("n_params: declared")
    assert given["N"]["unit"] == "parameters"


def test_declared_flops_per_token_is_explained_as_given():
    snap = run(start(0.0, flops_per_token=1e9), hello(0.1), [step(float(t), 100) for t in range(6)])
    entry = snap["explain"]["flops_per_token"]
    assert entry["value"] == 1e9 and redo(entry) == 1e9
    assert entry["inputs"][0]["source"].startswith("declared")


def test_progress_and_eta_in_steps_when_tokens_are_not_counted():
    # 10 of 40 steps, 0.5 s a step: progress 0.25; ETA 30 x 0.5 = 15 s
    snap = run(start(0.0, budget_steps=40), hello(0.1), [step(1.0 + 0.5 * i) for i in range(10)])
    explain = snap["explain"]
    assert explain["progress"]["formula"] == "steps / budget_steps"
    assert redo(explain["progress"]) == explain["progress"]["value"] == pytest.approx(0.25)
    assert explain["eta_s"]["formula"] == "max(budget_steps - steps, 0) * step_time_s"
    assert redo(explain["eta_s"]) == pytest.approx(15)


def test_step_budget_progress_is_in_steps_with_tokens_counted_too():
    # 200 of 400 steps = 0.5, in the budget's unit, though tokens (1,024 a step) are counted
    snap = run(start(0.0, budget_steps=400), hello(0.1), [step(float(t), 1024) for t in range(200)])
    entry = snap["explain"]["progress"]
    assert entry["formula"] == "steps / budget_steps"
    assert redo(entry) == entry["value"] == pytest.approx(0.5)
    assert snap["budget_tokens"] == 409_600  # 400 x 1,024: still there for the FLOPs required


def test_flops_budget_progress_and_eta_are_in_flops():
    # 6 steps of 100 tokens, 1 s apart, 1e9 FLOP/token: 6e11 FLOPs of a 1.2e12 budget = 0.5
    snap = run(start(0.0, budget_flops=1.2e12, flops_per_token=1e9), hello(0.1),
               [step(float(t), 100) for t in range(6)])
    entry = snap["explain"]["progress"]
    assert redo(entry) == entry["value"] == pytest.approx(0.5)
    assert redo(snap["explain"]["eta_s"]) == pytest.approx(snap["eta_s"])


def test_ofu_over_two_busy_gpus_is_their_mean():
    # GPU 0 at OFU 0.4, GPU 1 tensor active 0.25 at 1464 MHz: 0.25 x 1464/1830 = 0.2; mean 0.3
    snap = run(
        start(0.0), hello(0.1), fact(0.2, "device", {"name": h100_row()["name"], "index": 0,
                                                      "uuid": "GPU-0"}),
        fact(0.2, "device", {"name": h100_row()["name"], "index": 1, "uuid": "GPU-1"}, rank=1),
        gpu(2.0, h100_row(0), h100_row(1, tensor_active=0.25)),
    )
    entry = snap["explain"]["ofu"]
    assert entry["formula"] == "(ofu_gpu0 + ofu_gpu1) / 2"
    assert redo(entry) == entry["value"] == pytest.approx(0.3)


def test_absent_numbers_have_no_explanation():
    snap = run(start(0.0), hello(0.1))
    for name in ("mfu", "tokens_per_s", "eta_s", "ofu"):
        assert name in snap["absent"] and name not in snap["explain"]
    assert math.isfinite(snap["records"]["fed"])


def test_gpu_hours_and_training_flops_are_the_engines_with_their_formulas():
    """The passport shows these; the engine works them out: 1 GPU x 7 s / 3600 = 0.0019444 GPU-h;
    5,831,346,816 FLOP/token x 60,000 tokens = 3.49881e14 FLOP."""
    snap = live_run()
    assert snap["gpu_hours"] == pytest.approx(7 / 3600) == pytest.approx(0.0019444, rel=1e-4)
    entry = snap["explain"]["gpu_hours"]
    assert entry["formula"] == "n_gpus * elapsed_s / 3600" and entry["unit"] == "GPU-h"
    assert redo(entry) == pytest.approx(snap["gpu_hours"])
    spent = snap["explain"]["flops_spent"]
    assert spent["value"] == snap["flops_spent"] == FPT * 60_000 == pytest.approx(3.49881e14, rel=1e-5)
    assert spent["convention"] == "hf" and redo(spent) == pytest.approx(spent["value"])


def test_a_run_without_a_gpu_says_why_it_has_no_gpu_hours():
    snap = run(start(0.0), hello(0.1), [step(t, 100) for t in (1.0, 2.0, 3.0)], now=4.0)
    assert "gpu_hours" not in snap and "no GPU" in snap["absent"]["gpu_hours"]
