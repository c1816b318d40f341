"""Steps, tokens and tokens/s from rank 0's step records."""

from __future__ import annotations

import pytest

from .build import fact, hello, run, start, step, steps


def test_tokens_scale_by_world_size_and_rank_zero_is_the_clock():
    # 4 ranks, 1,000 tokens a step each; rank 0's records are the clock:
    # 10 steps x 1,000 x 4 = 40,000 tokens; rank 1's records add no steps.
    snap = run(
        start(0.0),
        hello(0.5, world_size=4),
        steps(1.0, 0.5, 10, tokens=1000),
        steps(1.0, 0.5, 10, tokens=1000, rank=1),
    )
    assert snap["steps"] == 10
    assert snap["tokens_seen"] == 40_000
    # 4,000 tokens every 0.5 s = 8,000 tok/s once past warm-up
    assert snap["tokens_per_s"] == pytest.approx(8000)
    assert snap["step_time_s"] == pytest.approx(0.5)


def test_dp_fact_beats_world_size():
    # tensor parallel 2 x data parallel 2 on 4 ranks: dp = 2 -> 10 x 1,000 x 2 = 20,000
    snap = run(start(0.0), hello(0.5, world_size=4), fact(0.6, "dp", 2), steps(1.0, 1.0, 10, 1000))
    assert snap["tokens_seen"] == 20_000


def test_aggregated_records_count_k_steps():
    # 3 records of k=5 steps, 5,000 tokens each (1,000 a step), 2.5 s apart
    recs = [step(1.0 + 2.5 * i, tokens=5000, k=5) for i in range(6)]
    snap = run(start(0.0), recs)
    assert snap["steps"] == 30
    assert snap["tokens_seen"] == 30_000
    assert snap["step_time_s"] == pytest.approx(0.5)  # 2.5 s / 5 steps
    assert snap["tokens_per_s"] == pytest.approx(2000)  # 5,000 / 2.5 s


def test_warmup_reports_are_ignored():
    # The first rates are slow (compile): 1 s, 1 s, 1 s; then 0.1 s per 1,000 tokens.
    times = [1.0, 2.0, 3.0, 4.0, 4.1, 4.2]
    snap = run(start(0.0), [step(t, tokens=1000) for t in times])
    # rates: 1000, 1000, 1000 (skipped: 3 warm-up reports), 10000, 10000
    assert snap["tokens_per_s"] == pytest.approx(10_000)


def test_declared_tokens_per_step_wins_and_warns_when_detected_disagrees():
    snap = run(start(0.0, tokens_per_step=2048), steps(1.0, 1.0, 8, tokens=1000))
    assert snap["tokens_seen"] == 8 * 2048
    assert snap["tokens_counted"] == "declared"
    assert any("2048" in w and "1000" in w for w in snap["warnings"])


def test_within_one_percent_no_warning():
    snap = run(start(0.0, tokens_per_step=1005), steps(1.0, 1.0, 8, tokens=1000))
    assert not any("tokens per step" in w for w in snap["warnings"])


def test_emitted_tokens_per_step_counts_detected_fact_does_not():
    emitted = run(start(0.0), fact(0.5, "tokens_per_step", 300, "emitted"), steps(1.0, 1.0, 4))
    assert emitted["tokens_seen"] == 1200
    detected = run(start(0.0), fact(0.5, "tokens_per_step", 300, "detected"), steps(1.0, 1.0, 4))
    # a detected per-step count is only checked against the batches: these steps carried no
    # tokens, so the tokens seen are unknown (absent), not 0
    assert "tokens_seen" not in detected
    # the reason (set by the samples part, which owns models without tokens) says the tokens
    # could not be counted, that such a model is measured in samples, and both ways to enable it
    reason = detected["absent"]["tokens_seen"]
    assert "could not count tokens" in reason and "measured in samples" in reason
    assert "--tokens-per-step" in reason and "emit(tokens_per_step=...)" in reason


def test_real_tokens_drive_rate_and_padding_is_shown():
    # 1,000 tokens a step of which 750 are not padding; one step every 0.5 s.
    snap = run(start(0.0), steps(1.0, 0.5, 10, tokens=1000, real_tokens=750))
    assert snap["tokens_seen"] == 7500
    assert snap["tokens_per_s"] == pytest.approx(1500)  # 750 / 0.5
    assert snap["tokens_counted"] == "real (padding excluded)"
    assert snap["padding"] == {
        "tokens_total": 10_000,
        "tokens_real": 7_500,
        "share": 0.25,
        "padded_tokens_per_s": pytest.approx(2000),
    }


def test_no_tokens_is_absent_with_a_way_to_enable():
    snap = run(start(0.0), steps(1.0, 1.0, 6))
    assert "tokens_per_s" not in snap
    assert "--tokens-per-step" in snap["absent"]["tokens_per_s"]


def test_declared_count_matching_the_real_tokens_does_not_warn():
    # 1,000 tokens a step, 750 of them real; the user declared the 750 that are not padding.
    snap = run(start(0.0, tokens_per_step=750), steps(1.0, 1.0, 8, tokens=1000, real_tokens=750))
    assert snap["tokens_seen"] == 8 * 750
    assert not any("tokens per step" in w for w in snap["warnings"])
    off = run(start(0.0, tokens_per_step=500), steps(1.0, 1.0, 8, tokens=1000, real_tokens=750))
    assert any("tokens per step" in w for w in off["warnings"])
