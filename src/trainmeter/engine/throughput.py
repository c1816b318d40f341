"""The step clock: steps, tokens and tokens/s, from rank 0's step records.

Why rank 0 alone: every data-parallel rank steps together, so one rank's records are the run's
clock and its token count times the data-parallel degree is the run's. Tokens per step are
always detected (so a declared value can be checked against them); a declared or emitted
`tokens_per_step` is what is counted when there is one. When step records carry `real_tokens`
(not padding), tokens/s and MFU use those; the padded count stays beside them.

tokens/s and the step time are amounts over wall time over one window (engine/rate.py): the
trailing `SPAN_S` seconds while the run goes on, the steady state (end of warm-up to the last
step) once it has ended. Every rate the engine derives (MFU, counted utilization, samples/s,
ETA, the plan, the waterfall) takes these two numbers, so every screen shows one rate.
"""

from __future__ import annotations

from typing import Any

from . import explain
from .formulas import MovingAverage, num
from .rate import FOLD_EVERY, SPAN_S, WARMUP, RateWindow, Window
from .section import Section

#: Kept for callers that name it: the intervals left out as warm-up.
WARMUP_REPORTS = WARMUP
ALPHA = 0.2


class StepClock:
    """Fed rank 0's step records in order; `dp` and `declared_per_step` are set by the engine.

    The counts (steps, tokens) and the record interval move with every record: a value's
    point reads the counts at once. The rate window is read only by a sample or a snapshot, so
    a record only joins `_raw` (its time and amounts) and they are folded from there when read
    (`window`) or when `FOLD_EVERY` wait: the same numbers, without the window's work on every
    record of a replay. A replay's block hands its records in one call (`step_many`)."""

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
        self._window = RateWindow()
        self._interval = MovingAverage(ALPHA, 1)  # the stuck-run alert's pace
        self._raw: list[tuple[float, int, float, float]] = []  # records not yet in the window
        self._prev_t: float | None = None  # the latest record's time (the interval's gaps)

    @property
    def window(self) -> RateWindow:
        """The rate window of every record so far (engine/rate.py)."""
        if self._raw:
            self.fold()
        return self._window

    @property
    def record_interval(self) -> MovingAverage:
        """The moving average of the seconds between step records (the stuck-run alert's pace),
        updated with each record (`MovingAverage.update` of each gap to a later record)."""
        return self._interval

    def fold(self) -> None:
        """Fold the waiting records into the window, in their order."""
        raw, self._raw = self._raw, []
        self._window.add_many(raw)

    def step(self, t: float, d: dict[str, Any]) -> None:
        self.step_values(t, d.get("k"), d.get("tokens"), d.get("real_tokens"), d.get("n"))

    def step_values(self, t: float, k: Any, tokens: Any, real: Any, n: Any) -> None:
        """One step record's fields, however it was read (a dict's `d`, or a typed record)."""
        if type(k) is not int or k <= 0:  # the common case first: a plain positive int
            k = k if isinstance(k, int) and not isinstance(k, bool) and k > 0 else 1
        tokens = float(tokens) if type(tokens) is int else num(tokens)
        real = None if real is None else num(real)
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
        prev = self._prev_t
        if prev is not None and t > prev:
            self._interval.update(t - prev)
        self._prev_t = t
        raw = self._raw
        raw.append((t, k, counted or 0.0, padded or 0.0))
        if len(raw) >= FOLD_EVERY:
            self.fold()
        if self.last_t is None:
            self.first_t = t
        self.last_t = t

    def counts(self) -> tuple[int, float | None]:
        """(steps, tokens seen or None while tokens are not counted): what a value's point
        reads of the clock (`Engine._point`)."""
        known = self.has_tokens or self.declared_per_step is not None
        return self.steps, self.tokens_seen if known else None

    def step_many(
        self, records: list[Any], counts: list[tuple[int, float | None]] | None = None
    ) -> None:
        """`step_values(record.t, d.k, d.tokens, d.real_tokens, d.n)` for each record (its
        payload `d`) in order, with the same state after it (tests/engine/test_feed_bulk.py):
        a replay's block hands its clock-rank steps here in one call (`Engine.feed_many`),
        the counts and the record interval's average kept in locals, made by the same
        operations in the same order (the same floats) and stored once. `counts`, when given,
        gets `counts()` after each record (the points of the values between them,
        `Engine._points_many`). The records wait in `_raw` as one at a time leaves them,
        folded once `FOLD_EVERY` wait after the call (the fold gives the same window however
        the records were cut)."""
        if not records:
            return
        dp, declared = self.dp, self.declared_per_step
        steps, seen = self.steps, self.tokens_seen
        total, real_sum = self.tokens_total, self.tokens_real
        has_tokens, has_real, last_n = self.has_tokens, self.has_real, self.last_n
        interval = self._interval
        prev, gaps, skip, alpha = self._prev_t, interval.seen, interval.skip, interval.alpha
        average, previous = interval.value, interval.previous
        append = self._raw.append
        # the latest record with tokens, with real tokens: its amount and k (the per-step
        # count made once, at the end)
        last_padded = last_real = None
        padded_k = real_k = 1
        t = prev
        for record in records:
            t = record.t
            d = record.d
            k = d.k
            if type(k) is not int or k <= 0:
                k = k if isinstance(k, int) and not isinstance(k, bool) and k > 0 else 1
            tokens = d.tokens
            tokens = float(tokens) if type(tokens) is int else num(tokens)
            n = d.n
            if type(n) is int or isinstance(n, int) and not isinstance(n, bool):
                last_n = n
            if tokens is not None:
                padded = tokens * dp
                total += padded
                last_padded, padded_k = padded, k
            else:
                padded = None
            real = d.real_tokens
            if real is not None:
                real = num(real)
            if real is not None:
                counted = real * dp
                real_sum += counted
                last_real, real_k = counted, k
            else:
                counted = padded
            if declared is not None:
                counted = k * declared
            steps += k
            if counted is not None:
                seen += counted
            if prev is not None and t > prev:  # `MovingAverage.update(t - prev)`
                gaps += 1
                if gaps > skip:
                    previous = average
                    average = t - prev if average is None else average + alpha * (t - prev - average)
            prev = t
            append((t, k, counted or 0.0, padded or 0.0))
            if counts is not None:
                counts.append(
                    (steps, seen if has_tokens or last_padded is not None or declared is not None
                     else None)
                )
        if last_padded is not None:
            has_tokens = True
            self.detected_per_step = last_padded / padded_k
        if last_real is not None:
            has_real = True
            self.detected_real_per_step = last_real / real_k
        self.steps, self.records, self.tokens_seen = steps, self.records + len(records), seen
        self.tokens_total, self.tokens_real = total, real_sum
        self.has_tokens, self.has_real, self.last_n = has_tokens, has_real, last_n
        interval.seen, interval.value, interval.previous = gaps, average, previous
        self._prev_t = prev
        if self.last_t is None:
            self.first_t = records[0].t
        self.last_t = t
        if len(self._raw) >= FOLD_EVERY:
            self.fold()

    def rate_window(self, finished: bool) -> Window | None:
        """The window every rate is taken over: steady once finished, else trailing."""
        return self.window.steady() if finished else self.window.trailing()

    @property
    def counted_per_step(self) -> float | None:
        """Tokens one optimizer step counts for: declared, else real, else padded detected."""
        if self.declared_per_step is not None:
            return self.declared_per_step
        if self.detected_real_per_step is not None:
            return self.detected_real_per_step
        return self.detected_per_step

    def padding(self, window: Window | None = None) -> dict[str, Any] | None:
        """{tokens_total, tokens_real, share, padded_tokens_per_s} once real tokens are known."""
        if not self.has_real or not self.tokens_total:
            return None
        out: dict[str, Any] = {
            "tokens_total": self.tokens_total,
            "tokens_real": self.tokens_real,
            "share": max(1.0 - self.tokens_real / self.tokens_total, 0.0),
        }
        rate = window.rate(window.padded) if window is not None else None
        if rate:
            out["padded_tokens_per_s"] = rate
        return out


def section(
    clock: StepClock,
    ranks: Any,
    no_agent: str | None,
    world_size: int,
    clock_rank: int = 0,
    finished: bool = False,
    detail: bool = True,
) -> Section:
    """steps, tokens_seen, step_index, tokens_per_s, tokens_counted, step_time_s, rate_window,
    step_times, padding, ranks (`detail` False: the explanations, the step-time spread and the
    ranks' table left out, for `Engine.sample`).

    `no_agent` is the reason no agent spoke from the training process (None when one did):
    then nothing counts steps or tokens, so they are absent with that reason, never 0.
    `clock_rank` is the rank whose step records are the clock: this node's local rank 0
    (rank 0 on a single node; docs/ranks.md). `finished`: the run has ended, so the rates are
    the steady state's; else the trailing window's.
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
    window = clock.rate_window(finished)
    tps = window.rate(window.tokens) if window is not None and clock.records else None
    if tps and tokens_known:
        out.values["tokens_per_s"] = tps
        counted = (
            "declared"
            if clock.declared_per_step is not None
            else "real (padding excluded)"
            if clock.has_real
            else "all (padding included)"
        )
        out.values["tokens_counted"] = counted
        if detail:
            out.explain["tokens_per_s"] = _explain_rate(clock, window, tps, counted, clock_rank)  # type: ignore[arg-type]
    elif not tokens_known:
        out.absent["tokens_per_s"] = no_tokens
    else:
        out.absent["tokens_per_s"] = _too_few(clock_rank)
    step_time = window.step_time() if window is not None else None
    if step_time:
        out.values["step_time_s"] = step_time
        if detail:
            out.explain["step_time_s"] = _explain_step_time(window, step_time, clock_rank)  # type: ignore[arg-type]
    else:
        out.absent["step_time_s"] = _too_few(clock_rank)
    if not detail:
        return out
    if window is not None and window.seconds > 0:
        out.values["rate_window"] = _window_entry(window, clock, tokens_known)
    spread = clock.window.spread()
    if spread is not None:
        out.values["step_times"] = spread
    padding = clock.padding(window)
    if padding is not None:
        out.values["padding"] = padding
    table = ranks.snapshot(finished)
    if table is not None:
        out.values["ranks"] = table
    elif world_size > 1:
        out.absent["ranks"] = "needs three step reports from each of two ranks or more"
    return out


def _too_few(clock_rank: int) -> str:
    """Why there is no rate yet (worded when needed: a sample asks each time)."""
    return (
        f"needs three step reports from rank {clock_rank} (the first interval is warm-up, "
        f"up to {WARMUP} on a longer run)"
    )


def _window_entry(window: Window, clock: StepClock, tokens_known: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "kind": window.kind,
        "start_t": window.start_t,
        "end_t": window.end_t,
        "seconds": window.seconds,
        "steps": window.steps,
        "warmup_intervals": clock.window.warmup,
    }
    if window.kind == "trailing":
        entry["span_s"] = SPAN_S
    if tokens_known:
        entry["tokens"] = window.tokens
    return entry


def _window_words(window: Window, rank: int) -> str:
    if window.kind == "steady":
        return (
            f"steady state: rank {rank}'s step reports from the end of warm-up (t={window.start_t:g}"
            f" s) to the last step (t={window.end_t:g} s)"
        )
    return (
        f"trailing window: rank {rank}'s step reports over the last {SPAN_S:g} s of the run "
        f"(t={window.start_t:g} s to t={window.end_t:g} s; all of the run after warm-up while "
        "it is shorter)"
    )


def _explain_rate(
    clock: StepClock, window: Window, tps: float, counted: str, rank: int
) -> dict[str, Any]:
    source = (
        "declared tokens per step x the steps in the window"
        if clock.declared_per_step is not None
        else f"tokens in rank {rank}'s step reports in the window x data-parallel degree "
        f"{clock.dp} ({counted})"
    )
    inputs = [
        explain.given("window_tokens", window.tokens, "tokens", source),
        explain.given("window_s", window.seconds, "s", "wall time of the window (measured)"),
    ]
    return explain.explanation(
        tps, "tokens/s", "window_tokens / window_s", inputs,
        note=_window_words(window, rank) + "; the first interval(s) after the first report are "
        "warm-up (compile, allocator)",
    )


def _explain_step_time(window: Window, value: float, rank: int) -> dict[str, Any]:
    inputs = [
        explain.given("window_s", window.seconds, "s", "wall time of the window (measured)"),
        explain.given(
            "window_steps", window.steps, "steps", f"optimizer steps in rank {rank}'s reports"
        ),
    ]
    return explain.explanation(
        value, "s", "window_s / window_steps", inputs, note=_window_words(window, rank)
    )
