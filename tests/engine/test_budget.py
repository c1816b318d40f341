"""Progress, ETA and the plan against what was declared."""

from __future__ import annotations

import pytest

from .build import device, end, run, start, steps
from .test_flops import REF

SHAPE = dict(
    n_params=REF.n_params,
    n_embedding_params=REF.n_embedding_params,
    n_layers=REF.n_layers,
    d_model=REF.d_model,
    seq_len=REF.seq_len,
)


def test_token_budget():
    # 10 steps of 1,000 tokens, 1 s apart: 10,000 of 100,000 = 10%; 1,000 tok/s
    # ETA = 90,000 / 1,000 = 90 s
    snap = run(start(0.0, budget_tokens=100_000), steps(1.0, 1.0, 10, tokens=1000))
    assert snap["progress"] == pytest.approx(0.1)
    assert snap["eta_s"] == pytest.approx(90)
    assert snap["budget"] == {"unit": "tokens", "value": 100_000, "source": "declared"}


def test_step_budget_converts_with_tokens_per_step():
    # 50 steps x 1,000 detected tokens per step = 50,000 tokens; 10,000 seen = 20%
    snap = run(start(0.0, budget_steps=50), steps(1.0, 1.0, 10, tokens=1000))
    assert snap["budget_tokens"] == 50_000
    assert snap["progress"] == pytest.approx(0.2)
    assert snap["eta_s"] == pytest.approx(40)


def test_a_step_budget_is_counted_in_steps_whatever_the_tokens_did():
    """100 of 100 steps is 100 %. Counted in tokens it was 99.3 %: the step budget became tokens
    at the latest tokens per step, and the batches were not all alike (issue 27 item 5). Here
    99 steps of 1,024 tokens and a last one of 700 (a short final batch): in tokens that reads
    102,076 / (100 x 700) = 145.8 %; in steps 100 / 100."""
    records = [*(steps(1.0, 1.0, 99, tokens=1024)), *(steps(100.0, 1.0, 1, tokens=700))]
    snap = run(start(0.0, budget_steps=100), *records)
    assert snap["progress"] == 1.0
    assert snap["eta_s"] == 0.0  # nothing left at any pace
    assert snap["explain"]["progress"]["formula"] == "steps / budget_steps"
    half = run(start(0.0, budget_steps=100), *records[:50])
    assert half["progress"] == 0.5 and half["eta_s"] == pytest.approx(50.0)  # 50 left x 1 s


def test_step_budget_without_tokens_falls_back_to_steps():
    # 10 of 40 steps; 0.5 s a step: 30 left x 0.5 = 15 s
    snap = run(start(0.0, budget_steps=40), steps(1.0, 0.5, 10))
    assert snap["progress"] == pytest.approx(0.25)
    assert snap["eta_s"] == pytest.approx(15)
    assert "--tokens-per-step" in snap["absent"]["budget_tokens"]


def test_flops_budget_needs_flops_per_token():
    # 6e9 FLOP/token declared; 6e13 FLOPs budget = 10,000 tokens; 5,000 seen = 50%
    snap = run(start(0.0, budget_flops=6e13, flops_per_token=6e9), steps(1.0, 1.0, 5, tokens=1000))
    assert snap["budget_tokens"] == pytest.approx(10_000)
    assert snap["progress"] == pytest.approx(0.5)  # 5,000 x 6e9 = 3e13 of 6e13 FLOPs
    assert snap["explain"]["progress"]["formula"] == "tokens_seen * flops_per_token / budget_flops"
    # 3e13 FLOPs left at 1,000 tok/s x 6e9 FLOP/token = 6e12 FLOP/s: 5 s
    assert snap["eta_s"] == pytest.approx(5.0)
    assert snap["flops_required"] == pytest.approx(6e13)
    assert snap["flops_remaining"] == pytest.approx(3e13)
    no_fpt = run(start(0.0, budget_flops=6e13), steps(1.0, 1.0, 5, tokens=1000))
    assert "--flops-per-token" in no_fpt["absent"]["progress"]


def test_no_budget_is_absent():
    snap = run(start(0.0), steps(1.0, 1.0, 5, tokens=1000))
    assert "progress" not in snap and "--budget-tokens" in snap["absent"]["progress"]


def test_plan_against_measured():
    # hf convention: 5,831,346,816 FLOP/token; 1 H100 SXM (989.5e12); plan MFU 0.4:
    # planned tokens/s = 0.4 x 989.5e12 / 5,831,346,816 = 67,874.6
    # measured: 10,000 tokens every 1 s = 10,000 tok/s
    # budget 1e6 tokens; seen 60,000 after step records at 1..6; ETA 940,000 / 10,000 = 94 s;
    # elapsed at the end record (t = 7) 7 s -> projected (7 + 94) / 3600 h
    snap = run(
        start(0.0, budget_tokens=1e6, plan_mfu=0.4, plan_hours=2, convention="hf", **SHAPE),
        device(0.5),
        steps(1.0, 1.0, 6, tokens=10_000),
        end(7.0),
    )
    plan = snap["plan"]
    assert plan["tokens_per_s"]["planned"] == pytest.approx(0.4 * 989.5e12 / 5_831_346_816)
    assert plan["tokens_per_s"]["measured"] == pytest.approx(10_000)
    assert plan["mfu"]["convention"] == "hf"
    # measured MFU = 5,831,346,816 x 10,000 / 989.5e12 = 0.058932
    assert plan["mfu"]["measured"] == pytest.approx(0.0589322, rel=1e-5)
    assert plan["hours"] == {"planned": 2, "projected": pytest.approx(7 / 3600)}
    assert snap["absent"]["eta_s"] == "the run has ended"
