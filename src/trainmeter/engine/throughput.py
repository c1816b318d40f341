"""The step clock: steps, tokens and tokens/s, from rank 0's step records.

Why rank 0 alone: every data-parallel rank steps together, so one rank's records are the run's
clock and its token count times the data-parallel degree is the run's. Tokens per step are
always detected (so a declared value can be checked against them); a declared or emitted
`tokens_per_step` is what is counted when there is one. When step records carry `real_tokens`
(not padding), tokens/s and MFU use those; the padded count stays beside them.
"""

from __future__ import annotations

from typing import Any

from . import explain
from .formulas import MovingAverage, num
from .ranks import RankTimes
from .section import Section

#: Rate reports ignored at the start (compile, allocator warm-up).
WARMUP_REPORTS = 3
ALPHA = 0.2


class StepClock:
    """Fed rank 0's step records in order; `dp` and `declared_per_step` are set by the engine."""

    def __init__(self) -> None:
        self.dp = 1
        self.declared_per_step: float | None = None
        self.steps = 0
        self.records = 0
        self.tokens_seen = 0.0
        self.tokens_total = 0.0  # detected, padding included, all data-parallel ranks
        self.tokens_real = 0.0  # detected, padding excluded (only while records carry it)
        self.has_real = False
        self.has_tokens = False
        self.detected_per_step: float | None = None
        self.detected_real_per_step: float | None = None
        self.first_t: float | None = None
        self.last_t: float | None = None
        self.last_n: int | None = None
        self.tokens_per_s = MovingAverage(ALPHA, WARMUP_REPORTS)
        self.padded_tokens_per_s = MovingAverage(ALPHA, WARMUP_REPORTS)
        self.record_interval = MovingAverage(ALPHA, 1)
        self.rate_inputs: tuple[float, float] | None = None  # (tokens, seconds) of the latest rate

    def step(self, t: float, d: dict[str, Any]) -> None:
        k = d.get("k")
        if type(k) is not int or k <= 0:  # the common case first: a plain positive int
            k = k if isinstance(k, int) and not isinstance(k, bool) and k > 0 else 1
        tokens = d.get("tokens")
        tokens = float(tokens) if type(tokens) is int else num(tokens)
        real = d.get("real_tokens")
        real = None if real is None else num(real)
        n = d.get("n")
        if type(n) is int or isinstance(n, int) and not isinstance(n, bool):
            self.last_n = n
        dp = self.dp
        padded = None
        if tokens is not None:
            padded = tokens * dp
            self.has_tokens = True
            self.tokens_total += padded
            self.detected_per_step = padded / k
        counted: float | None
        if real is not None:
            real_all = real * dp
            self.has_real = True
            self.tokens_real += real_all
            self.detected_real_per_step = real_all / k
            counted = real_all
        else:
            counted = padded
        if self.declared_per_step is not None:
            counted = k * self.declared_per_step
        self.steps += k
        self.records += 1
        if counted is not None:
            self.tokens_seen += counted
        prev = self.last_t
        if prev is None:
            self.first_t = t
        elif t > prev:
            dt = t - prev
            self.record_interval.update(dt)
            if counted is not None:
                self.tokens_per_s.update(counted / dt)
                self.rate_inputs = (counted, dt)
            if padded is not None:
                self.padded_tokens_per_s.update(padded / dt)
        self.last_t = t

    @property
    def counted_per_step(self) -> float | None:
        """Tokens one optimizer step counts for: declared, else real, else padded detected."""
        if self.declared_per_step is not None:
            return self.declared_per_step
        if self.detected_real_per_step is not None:
            return self.detected_real_per_step
        return self.detected_per_step

    def padding(self) -> dict[str, Any] | None:
        """{tokens_total, tokens_real, share, padded_tokens_per_s} once real tokens are known."""
        if not self.has_real or not self.tokens_total:
            return None
        out: dict[str, Any] = {
            "tokens_total": self.tokens_total,
            "tokens_real": self.tokens_real,
            "share": max(1.0 - self.tokens_real / self.tokens_total, 0.0),
        }
        if self.padded_tokens_per_s.value is not None:
            out["padded_tokens_per_s"] = self.padded_tokens_per_s.value
        return out


def section(
    clock: StepClock, ranks: RankTimes, no_agent: str | None, world_size: int, clock_rank: int = 0
) -> Section:
    """steps, tokens_seen, step_index, tokens_per_s, tokens_counted, step_time_s, padding, ranks.

    `no_agent` is the reason no agent spoke from the training process (None when one did):
    then nothing counts steps or tokens, so they are absent with that reason, never 0.
    `clock_rank` is the rank whose step records are the clock: this node's local rank 0
    (rank 0 on a single node; docs/ranks.md).
    """
    out = Section()
    steps_known = clock.records > 0 or no_agent is None
    if not steps_known:
        for key in ("steps", "tokens_seen", "tokens_per_s", "step_time_s"):
            out.absent[key] = no_agent  # type: ignore[assignment]
        return out
    out.values["steps"] = clock.steps
    no_tokens = (
        "the agent could not count tokens in the batches: declare --tokens-per-step or "
        "emit(tokens_per_step=...)"
    )
    tokens_known = clock.has_tokens or clock.declared_per_step is not None or not clock.records
    if tokens_known:
        out.values["tokens_seen"] = clock.tokens_seen
    else:
        out.absent["tokens_seen"] = no_tokens
    if clock.last_n is not None:
        out.values["step_index"] = clock.last_n
    tps = clock.tokens_per_s.value
    if tps:
        out.values["tokens_per_s"] = tps
        counted = (
            "declared"
            if clock.declared_per_step is not None
            else "real (padding excluded)"
            if clock.has_real
            else "all (padding included)"
        )
        out.values["tokens_counted"] = counted
        out.explain["tokens_per_s"] = _explain_rate(clock, tps, counted)
    elif not tokens_known:
        out.absent["tokens_per_s"] = no_tokens
    else:
        out.absent["tokens_per_s"] = (
            f"needs {WARMUP_REPORTS + 2} step reports from rank {clock_rank} (the first "
            f"{WARMUP_REPORTS} intervals are warm-up)"
        )
    step_time = ranks.step_time(clock_rank)
    if step_time:
        out.values["step_time_s"] = step_time
        out.explain["step_time_s"] = _explain_step_time(ranks, step_time)
    else:
        out.absent["step_time_s"] = (
            f"needs three step reports from rank {clock_rank} (the first interval is warm-up)"
        )
    padding = clock.padding()
    if padding is not None:
        out.values["padding"] = padding
    table = ranks.snapshot()
    if table is not None:
        out.values["ranks"] = table
    elif world_size > 1:
        out.absent["ranks"] = "needs three step reports from each of two ranks or more"
    return out


def _explain_rate(clock: StepClock, tps: float, counted: str) -> dict[str, Any]:
    tokens, seconds = clock.rate_inputs or (0.0, 0.0)
    formula, inputs = explain.moving_average(
        "tokens/s", "tokens/s", "interval_tokens / interval_s", clock.tokens_per_s.previous, ALPHA
    )
    source = (
        "declared tokens per step x the steps of rank 0's latest step report"
        if clock.declared_per_step is not None
        else f"tokens in rank 0's latest step report x data-parallel degree {clock.dp} "
        f"({counted})"
    )
    inputs = [
        explain.given("interval_tokens", tokens, "tokens", source),
        explain.given(
            "interval_s", seconds, "s", "time between rank 0's two latest step reports (measured)"
        ),
        *inputs,
    ]
    return explain.explanation(
        tps, "tokens/s", formula, inputs,
        note=f"moving average over rank 0's step reports; the first {WARMUP_REPORTS} intervals "
        "(compile, warm-up) are left out",
    )


def _explain_step_time(ranks: RankTimes, value: float) -> dict[str, Any]:
    seconds, k = ranks.last_interval(0) or (0.0, 1)
    formula, inputs = explain.moving_average(
        "the step time", "s", "interval_s / interval_steps", ranks.previous(0), ranks.ALPHA
    )
    inputs = [
        explain.given(
            "interval_s", seconds, "s", "time between rank 0's two latest step reports (measured)"
        ),
        explain.given(
            "interval_steps", k, "steps", "optimizer steps in rank 0's latest step report"
        ),
        *inputs,
    ]
    return explain.explanation(
        value, "s", formula, inputs,
        note="moving average over rank 0's step reports; the first interval is left out",
    )
