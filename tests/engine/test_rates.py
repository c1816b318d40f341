"""tokens/s and the step time are Σ amount ÷ Σ wall time over one window, worked by hand.

Live the window is the trailing 30 s (all of the run after warm-up while shorter); once the run
has ended it is the steady state, from the end of warm-up (the first 3 intervals between step
reports) to the last step. A mean of per-report rates would weight the fast intervals; these
streams are built so that it cannot pass.
"""

from __future__ import annotations

import random

import pytest

from trainmeter.engine.rate import EXACT_DURATIONS, GRAIN_S, MAX_BLOCKS, RateWindow

from .build import end, hello, run, start, step


def finished(times: list[float], tokens: float = 1000, **kw) -> dict:
    return run(start(0.0), [step(t, tokens, **kw) for t in times], end(times[-1] + 1.0))


def live(times: list[float], tokens: float = 1000, **kw) -> dict:
    return run(start(0.0), [step(t, tokens, **kw) for t in times], now=times[-1] + 0.1)


def cumulative(t0: float, intervals: list[float]) -> list[float]:
    out = [t0]
    for dt in intervals:
        out.append(out[-1] + dt)
    return out


def test_steps_alternating_10_and_100_ms():
    # 22 intervals 0.01, 0.1, 0.01, ... ; warm-up: the first 3 (0.01, 0.1, 0.01).
    # Left: intervals 4..22 = ten of 0.1 s and nine of 0.01 s = 1.09 s for 19 steps.
    times = cumulative(1.0, [0.01, 0.1] * 11)
    snap = finished(times)
    assert snap["tokens_per_s"] == pytest.approx(19_000 / 1.09, rel=1e-9)  # 17,431.19
    assert snap["step_time_s"] == pytest.approx(1.09 / 19, rel=1e-9)
    # the distribution beside it: 9 of 10 ms, 10 of 100 ms; the median's rank 9.5 is a 100 ms
    dist = snap["step_times"]
    assert dist["p10_s"] == pytest.approx(0.01) and dist["p90_s"] == pytest.approx(0.1)
    assert dist["median_s"] == pytest.approx(0.1)
    window = snap["rate_window"]
    assert window["kind"] == "steady" and window["steps"] == 19
    assert window["start_t"] == times[3] and window["end_t"] == times[-1]
    # a mean of the per-interval rates would say (9 x 100,000 + 10 x 10,000) / 19 = 52,631
    assert snap["tokens_per_s"] < 20_000


def test_a_five_second_stall_counts_once_the_run_has_ended_and_leaves_the_live_window():
    # 0.5 s steps, a 5 s stall as the 11th interval, 100 intervals in all.
    intervals = [0.5] * 10 + [5.0] + [0.5] * 89
    times = cumulative(1.0, intervals)
    done = finished(times)
    # steady: intervals 4..100 = 96 x 0.5 + 5 = 53 s for 97 steps
    assert done["tokens_per_s"] == pytest.approx(97_000 / 53.0, rel=1e-9)
    assert done["step_time_s"] == pytest.approx(53.0 / 97, rel=1e-9)
    assert done["step_times"]["median_s"] == 0.5 and done["step_times"]["p90_s"] == 0.5
    # live: the last 30 s (60 steps of 0.5 s, long after the stall): 2,000 tokens/s
    now = live(times)
    assert now["rate_window"]["kind"] == "trailing" and now["rate_window"]["span_s"] == 30
    assert now["rate_window"]["seconds"] == pytest.approx(30.0)
    assert now["tokens_per_s"] == pytest.approx(2000.0, rel=1e-9)
    # live, 10 s after the stall: the window holds it
    early = live(times[:31])  # 20 intervals after the stall's end...
    t_stall_end = times[11]
    assert early["rate_window"]["start_t"] < t_stall_end
    span = early["rate_window"]
    assert early["tokens_per_s"] == pytest.approx(span["tokens"] / span["seconds"], rel=1e-9)
    assert early["tokens_per_s"] < 2000.0


def test_a_slow_first_step_is_warm_up():
    # compile: the first interval takes 10 s, then 0.2 s steps.
    times = cumulative(1.0, [10.0] + [0.2] * 20)
    assert finished(times)["tokens_per_s"] == pytest.approx(5000.0, rel=1e-9)
    # a short run (4 reports) leaves out only 2 intervals, still the slow one
    short = finished(times[:4])
    assert short["rate_window"]["warmup_intervals"] == 2
    assert short["tokens_per_s"] == pytest.approx(5000.0, rel=1e-9)
    # two reports: one interval, which is warm-up: no rate yet, with the reason
    two = finished(times[:2])
    assert "tokens_per_s" not in two and "three step reports" in two["absent"]["tokens_per_s"]


def test_two_ranks_at_different_speeds():
    # rank 0: 0.1 s steps; rank 1 alternates 0.1 s and 0.2 s (0.15 s a step on average, over
    # time). 2 data-parallel ranks: tokens per step = 2 x 1,000, clocked by rank 0.
    r0 = cumulative(1.0, [0.1] * 20)
    r1 = cumulative(1.0, [0.1, 0.2] * 10)
    snap = run(
        start(0.0),
        hello(0.5, world_size=2),
        hello(0.5, world_size=2, rank=1),
        sorted(
            [step(t, 1000) for t in r0] + [step(t, 1000, rank=1) for t in r1],
            key=lambda r: r["t"],
        ),
        end(10.0),
    )
    assert snap["tokens_per_s"] == pytest.approx(2000 / 0.1, rel=1e-9)
    times = snap["ranks"]["step_time_s"]
    assert times["0"] == pytest.approx(0.1, rel=1e-9)
    # rank 1, steady: intervals 4..20 = 0.2 + (8 x 0.1 + 8 x 0.2) = 2.6 s for 17 steps
    assert times["1"] == pytest.approx(2.6 / 17, rel=1e-9)
    assert snap["ranks"]["slowest"] == "1"
    assert snap["ranks"]["spread"] == pytest.approx((2.6 / 17) / 0.1 - 1, rel=1e-9)


def test_aggregated_reports_of_k_steps_are_weighted_by_their_steps():
    # reports of k = 4 steps (4,000 tokens) taking 0.4 s, and of k = 1 step taking 0.3 s
    intervals, ks = [], []
    for _ in range(10):
        intervals += [0.4, 0.3]
        ks += [4, 1]
    times = cumulative(1.0, intervals)
    recs = [step(times[0], 4000, k=4)] + [
        step(t, 1000 * k, k=k) for t, k in zip(times[1:], ks, strict=True)
    ]
    snap = run(start(0.0), recs, end(times[-1] + 1))
    # steady: intervals 4..20: nine of (k=1, 0.3 s) at even positions... worked out:
    # positions 4..20 hold 8 of (4 steps, 0.4 s) and 9 of (1 step, 0.3 s)
    steps_in, seconds = 8 * 4 + 9, 8 * 0.4 + 9 * 0.3
    assert snap["tokens_per_s"] == pytest.approx(1000 * steps_in / seconds, rel=1e-9)
    assert snap["step_time_s"] == pytest.approx(seconds / steps_in, rel=1e-9)
    # per-step times: 32 steps of 0.1 s, 9 of 0.3 s: median 0.1, p90 0.3
    assert snap["step_times"]["median_s"] == pytest.approx(0.1)
    assert snap["step_times"]["p90_s"] == pytest.approx(0.3)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rate_is_tokens_over_elapsed_to_1e_9_on_an_irregular_loop(seed):
    rng = random.Random(seed)
    intervals = [rng.choice([0.004, 0.12]) * rng.uniform(0.5, 2.0) for _ in range(800)]
    tokens = [rng.randint(500, 1500) for _ in range(801)]
    times = cumulative(1.0, intervals)
    recs = [step(t, n) for t, n in zip(times, tokens, strict=True)]
    done = run(start(0.0), recs, end(times[-1] + 1))
    # the truth from the records: tokens after report 3 over the time since report 3
    assert done["tokens_per_s"] == pytest.approx(sum(tokens[4:]) / (times[-1] - times[3]), rel=1e-9)
    now = run(start(0.0), recs, now=times[-1])
    w = now["rate_window"]
    first = times.index(w["start_t"])
    # the window starts at a report 30 s to 30 s + GRAIN_S before the newest (a report less
    # than GRAIN_S after the previous candidate does not start a window)
    assert 30.0 <= w["end_t"] - w["start_t"] <= 30.0 + GRAIN_S + max(intervals)
    truth = sum(tokens[first + 1 :]) / (times[-1] - times[first])
    assert now["tokens_per_s"] == pytest.approx(truth, rel=1e-9)
    # every rate derived from it agrees: samples/s = per step / step time, ETA = left / rate
    assert now["step_time_s"] == pytest.approx(w["seconds"] / w["steps"], rel=1e-9)


def test_explain_states_the_window():
    times = cumulative(1.0, [0.1] * 10)
    note = live(times)["explain"]["tokens_per_s"]["note"]
    assert "last 30 s" in note
    done = finished(times)["explain"]["tokens_per_s"]
    assert "steady state" in done["note"] and done["formula"] == "window_tokens / window_s"


def test_blocks_keep_exact_sums_and_the_distribution_stays_bounded():
    window = RateWindow()
    rng = random.Random(7)
    t = 0.0
    window.add(t, 1, 100.0)
    total_s = total_steps = 0.0
    for i in range(EXACT_DURATIONS + 3000):
        dt = rng.choice([0.01, 0.1])
        t += dt
        window.add(t, 1, 100.0)
        if i >= 3:
            total_s += dt
            total_steps += 1
    spread = window.spread()
    assert spread is not None
    blocks = spread["blocks"]
    assert MAX_BLOCKS // 2 <= len(blocks) <= MAX_BLOCKS
    assert sum(b[0] for b in blocks) == total_steps
    assert sum(b[2] for b in blocks) == pytest.approx(total_s, rel=1e-9)
    # past the exact store, quantiles come from 1%-wide bins
    assert spread["p10_s"] == pytest.approx(0.01, rel=0.01)
    assert spread["p90_s"] == pytest.approx(0.1, rel=0.01)


def test_binned_durations_wait_in_batches_and_give_the_bins_of_one_at_a_time():
    """Past the exact store the durations are binned `SPILL_EVERY` at a time (no logarithm
    per step): read at any moment, the quantiles are those of binning each value as it came,
    worked here with the bin formula itself (floor(log(v) / log(1.01)), weights summed)."""
    from math import floor, log

    from trainmeter.engine.rate import _BIN, SPILL_EVERY, Durations

    rng = random.Random(11)
    durations = Durations()
    bins: dict[int, int] = {}
    values = [(rng.choice([0.01, 0.013, 0.1, 0.0]) * rng.uniform(1, 1.5), rng.randint(1, 3))
              for _ in range(EXACT_DURATIONS + 3 * SPILL_EVERY + 17)]
    for i, (value, k) in enumerate(values):
        durations.add(value, k)
        if i == EXACT_DURATIONS + SPILL_EVERY + 5:  # read between two spills
            assert durations.binned and 0 < len(durations.exact) <= SPILL_EVERY
            durations.quantiles((0.5,), [])
            assert durations.exact == []
    assert len(durations.exact) <= SPILL_EVERY  # the state stays bounded
    for value, k in values:
        key = floor(log(value) / log(_BIN)) if value > 0 else -(10**9)
        bins[key] = bins.get(key, 0) + k
    pairs = sorted(((_BIN ** (b + 0.5)) if b > -(10**9) else 0.0, w) for b, w in bins.items())
    total = sum(w for _, w in pairs)
    want = []
    for q in (0.1, 0.5, 0.9):
        acc = 0
        for value, weight in pairs:
            acc += weight
            if acc >= q * total - 1e-9:
                want.append(value)
                break
    assert durations.quantiles((0.1, 0.5, 0.9), []) == want
    assert durations.bins == bins
