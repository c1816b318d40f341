"""Rates as amounts over wall time: Σ tokens ÷ Σ seconds, never a mean of per-report rates.

A mean of per-interval rates weights the fast intervals and a mean of durations the slow ones,
so on a loop whose steps take irregular time they disagree with each other and with the truth.
Every rate here is one quotient of two sums taken over one window of a rank's step records:

- live, the trailing window: the last `SPAN_S` seconds of step records (from a record `SPAN_S`
  to `SPAN_S` + `GRAIN_S` before the newest one), or everything after warm-up while that is
  shorter;
- a finished run, the steady-state window: from the end of warm-up to the last step.

Warm-up is the first `WARMUP` intervals between step records (compile, allocator warm-up);
a run of fewer records leaves out fewer, never less than one (the first interval is always
warm-up). Beside the steady window: the per-step time distribution (median, p10, p90) and the
window cut into at most `MAX_BLOCKS` runs of consecutive intervals, the units `tm check`
resamples for its noise band. Memory stays bounded however long the run.
"""

from __future__ import annotations

from collections import deque
from math import floor, log
from typing import Any

#: Intervals between step records left out at the start of a run.
WARMUP = 3
#: The live (trailing) window, in seconds of the run's own clock.
SPAN_S = 30.0
#: Records closer than this to the previous candidate do not start a trailing window: the
#: window starts within this much of `SPAN_S` before the newest record (its quotient stays
#: exact), and a fast loop does not pay a queue operation per step.
GRAIN_S = 0.25
#: Blocks of consecutive intervals kept for the noise band (between half this and this many).
MAX_BLOCKS = 64
#: Per-step durations kept exactly; past this many, a log histogram (bins 1% wide) holds them.
EXACT_DURATIONS = 4096
#: Once binned, values wait this many at a time to be binned (the state stays small).
SPILL_EVERY = 512
#: Raw step records an owner keeps before folding them into its window (`add_many`): the
#: fold runs when a window is read or when this many wait, so memory stays bounded.
FOLD_EVERY = 256
_BIN = 1.01
_LOG_BIN = log(_BIN)
_ZERO_BIN = -(10**9)  # the bin of a zero duration


class Window:
    """Sums over one window of step records: `start_t`..`end_t`, `steps`, `tokens`, `padded`."""

    __slots__ = ("kind", "start_t", "end_t", "steps", "tokens", "padded", "seconds")

    def __init__(self, kind: str, start: tuple, end: tuple) -> None:
        self.kind = kind
        self.start_t, self.end_t = start[0], end[0]
        self.steps = end[1] - start[1]
        self.tokens = end[2] - start[2]
        self.padded = end[3] - start[3]
        #: end_t - start_t, once (a property read four times a sample was a call each)
        self.seconds: float = self.end_t - self.start_t

    def rate(self, amount: float) -> float | None:
        seconds = self.seconds
        return amount / seconds if seconds > 0 else None

    def step_time(self) -> float | None:
        seconds = self.seconds
        return seconds / self.steps if self.steps > 0 and seconds > 0 else None


class Durations:
    """Per-step seconds, each weighted by the steps of its interval: exact up to
    `EXACT_DURATIONS` intervals, then a histogram of log-spaced bins (quantiles within 1%).

    Once binned, new values wait in `exact` and are binned `SPILL_EVERY` at a time (and when
    the quantiles are read): the same bins, without a logarithm and a call per step."""

    __slots__ = ("exact", "bins", "binned", "limit")

    def __init__(self) -> None:
        self.exact: list[tuple[float, int]] = []  # every value; once `binned`, those not yet
        self.bins: dict[int, int] = {}
        self.binned = False
        self.limit = EXACT_DURATIONS  # values `exact` holds before they are binned

    def add(self, per_step_s: float, k: int) -> None:
        exact = self.exact
        exact.append((per_step_s, k))
        if len(exact) > self.limit:
            self._spill()

    def _spill(self) -> None:
        """Bin the values in `exact` (from here on the durations are a histogram)."""
        bins, log_bin = self.bins, _LOG_BIN
        for value, weight in self.exact:
            key = floor(log(value) / log_bin) if value > 0 else _ZERO_BIN
            bins[key] = bins.get(key, 0) + weight
        self.exact = []
        self.binned = True
        self.limit = SPILL_EVERY

    def quantiles(
        self, qs: tuple[float, ...], extra: list[tuple[float, int]]
    ) -> list[float] | None:
        """Weighted nearest-rank quantiles (the smallest value with at least q of the weight
        at or below it), over these durations and `extra`; None when there are none."""
        if not self.binned:
            pairs = sorted(self.exact + extra)
        else:
            if self.exact:
                self._spill()
            pairs = sorted(
                [((_BIN ** (b + 0.5)) if b > _ZERO_BIN else 0.0, w) for b, w in self.bins.items()]
                + extra
            )
        if not pairs:
            return None
        total = sum(w for _, w in pairs)
        out = []
        for q in qs:
            need, acc = q * total, 0
            chosen = pairs[-1][0]
            for value, weight in pairs:
                acc += weight
                if acc >= need - 1e-9:
                    chosen = value
                    break
            out.append(chosen)
        return out


class Blocks:
    """The window as runs of consecutive intervals, [steps, tokens, seconds] each: up to
    `MAX_BLOCKS`; when full, neighbours merge pairwise and each block holds twice as many
    intervals. Sums stay exact; a block bootstrap over them keeps slow drifts in the noise."""

    __slots__ = ("blocks", "size", "fill")

    def __init__(self) -> None:
        self.blocks: list[list[float]] = []
        self.size = 1  # intervals per block
        self.fill = 0  # intervals in the last block

    def add(self, steps: float, tokens: float, seconds: float) -> None:
        if self.blocks and self.fill < self.size:
            last = self.blocks[-1]
            last[0] += steps
            last[1] += tokens
            last[2] += seconds
            self.fill += 1
            return
        self.blocks.append([steps, tokens, seconds])
        self.fill = 1
        if len(self.blocks) > MAX_BLOCKS:
            old = self.blocks
            self.blocks = [
                [a + b for a, b in zip(old[i], old[i + 1], strict=True)]
                if i + 1 < len(old)
                else old[i]
                for i in range(0, len(old), 2)
            ]
            self.size *= 2
            self.fill = self.size if len(old) % 2 == 0 else 1


class RateWindow:
    """Fed one rank's step records in order: `add(t, k, tokens, padded)`. Keeps cumulative sums
    at the records that may start a window: the first `WARMUP + 1` and those of the last
    `SPAN_S` seconds."""

    def __init__(self, detail: bool = True) -> None:
        self.detail = detail  # keep the distribution and the blocks (the clock rank's window)
        self.records = 0
        self.last: tuple | None = None  # (t, steps, tokens, padded) summed up to the latest record
        self.head: list[tuple] = []  # the same at records 0..WARMUP
        self.head_intervals: list[tuple[float, int, float, float]] = []  # intervals 1..WARMUP
        self.recent: deque[tuple] = deque()
        self.durations = Durations()
        self.blocks = Blocks()

    def add(self, t: float, k: int, tokens: float = 0.0, padded: float = 0.0) -> None:
        """One step record: `k` steps ending at `t`. Constant work (a replay feeds every one)."""
        last = self.last
        n = self.records
        self.records = n + 1
        if last is None:
            # the first record ends a stretch of unknown length (start-up): its amounts are in
            # no window; it only starts the first interval
            entry = (t, 0.0, 0.0, 0.0)
            self.head.append(entry)
        else:
            t0 = last[0]
            if t < t0:
                t = t0  # a record out of order adds its amounts at the latest time
            entry = (t, last[1] + k, last[2] + tokens, last[3] + padded)
            if n <= WARMUP:
                self.head.append(entry)
                self.head_intervals.append((t - t0, k, tokens, padded))
            elif self.detail:
                seconds = t - t0
                if seconds > 0:
                    self.durations.add(seconds / k, k)
                self.blocks.add(k, tokens, seconds)
        self.last = entry
        recent = self.recent
        if not recent or t - recent[-1][0] >= GRAIN_S:
            recent.append(entry)
            horizon = t - SPAN_S
            while recent[0] is not entry and recent[1][0] <= horizon:
                recent.popleft()

    def add_many(self, entries: list[tuple[float, int, float, float]]) -> None:
        """`add(t, k, tokens, padded)` for each entry in order, with the same state after it
        (tests/engine/test_rate_fold.py compares them on random runs), in one loop: the owners
        keep a run's raw step records and fold them here when a window is read, or when
        `FOLD_EVERY` are waiting. The cumulative sums are built as tuples only where a window
        may start (the head, `recent`) and at the end (`last`); `recent` is trimmed once at
        the end to the horizon of its newest entry, which is where trimming after each entry
        leaves it (the entries' times only grow, so the horizon only moves on)."""
        if not entries:
            return
        last, n = self.last, self.records
        head, recent, detail = self.head, self.recent, self.detail
        exact = self.durations.exact
        blocks = self.blocks
        rows, size, fill = blocks.blocks, blocks.size, blocks.fill
        it = iter(entries)
        if last is None:
            # the first record ends a stretch of unknown length (start-up): only its time counts
            t = next(it)[0]
            last = (t, 0.0, 0.0, 0.0)
            head.append(last)
            n = 1
            if not recent:
                recent.append(last)
        t_prev, steps, tokens_sum, padded_sum = last
        anchor = recent[-1][0] if recent else None
        row = rows[-1] if rows else None
        b_steps, b_tokens, b_seconds = row if row is not None else (0, 0.0, 0.0)
        for t, k, tokens, padded in it:
            if t < t_prev:
                t = t_prev  # a record out of order adds its amounts at the latest time
            steps = steps + k
            tokens_sum = tokens_sum + tokens
            padded_sum = padded_sum + padded
            entry = None
            if n <= WARMUP:
                entry = (t, steps, tokens_sum, padded_sum)
                head.append(entry)
                self.head_intervals.append((t - t_prev, k, tokens, padded))
            elif detail:
                seconds = t - t_prev
                if seconds > 0:
                    exact.append((seconds / k, k))
                if row is not None and fill < size:  # the last block's sums, kept in locals
                    b_steps += k
                    b_tokens += tokens
                    b_seconds += seconds
                    fill += 1
                else:
                    if row is not None:
                        row[0], row[1], row[2] = b_steps, b_tokens, b_seconds
                    blocks.fill = fill
                    blocks.add(k, tokens, seconds)
                    rows, size, fill = blocks.blocks, blocks.size, blocks.fill
                    row = rows[-1]
                    b_steps, b_tokens, b_seconds = row
            n += 1
            t_prev = t
            if anchor is None or t - anchor >= GRAIN_S:
                recent.append(entry or (t, steps, tokens_sum, padded_sum))
                anchor = t
            if n > WARMUP and anchor is not None:
                break  # past the head: the loops below, without its checks
        if detail:  # the loop above past the head, written out
            exact_append = exact.append
            if row is None:  # no block yet: the first interval starts one (`Blocks.add`)
                fill = size
            for t, k, tokens, padded in it:
                if t < t_prev:
                    t = t_prev  # a record out of order adds its amounts at the latest time
                steps = steps + k
                tokens_sum = tokens_sum + tokens
                padded_sum = padded_sum + padded
                seconds = t - t_prev
                if seconds > 0:
                    exact_append((seconds / k, k))
                if fill < size:  # the last block's sums, kept in locals
                    b_steps += k
                    b_tokens += tokens
                    b_seconds += seconds
                    fill += 1
                else:
                    if row is not None:
                        row[0], row[1], row[2] = b_steps, b_tokens, b_seconds
                    blocks.fill = fill
                    blocks.add(k, tokens, seconds)
                    rows, size, fill = blocks.blocks, blocks.size, blocks.fill
                    row = rows[-1]
                    b_steps, b_tokens, b_seconds = row
                t_prev = t
                if t - anchor >= GRAIN_S:  # type: ignore[operator]
                    recent.append((t, steps, tokens_sum, padded_sum))
                    anchor = t
        else:
            for t, k, tokens, padded in it:
                if t < t_prev:
                    t = t_prev
                steps = steps + k
                tokens_sum = tokens_sum + tokens
                padded_sum = padded_sum + padded
                t_prev = t
                if t - anchor >= GRAIN_S:  # type: ignore[operator]
                    recent.append((t, steps, tokens_sum, padded_sum))
                    anchor = t
        self.records += len(entries)  # one each (the loops past the head count none)
        self.last = (t_prev, steps, tokens_sum, padded_sum)
        if row is not None:
            row[0], row[1], row[2] = b_steps, b_tokens, b_seconds
            blocks.fill = fill
        horizon = anchor - SPAN_S  # type: ignore[operator]
        while len(recent) > 1 and recent[1][0] <= horizon:
            recent.popleft()
        durations = self.durations
        if len(exact) > durations.limit:
            durations._spill()

    @property
    def warmup(self) -> int:
        """Intervals left out as warm-up now: `WARMUP`, fewer while the run is short."""
        return max(min(WARMUP, self.records - 2), 1)

    def steady(self) -> Window | None:
        """From the end of warm-up to the latest record (None before three records)."""
        if self.records < 3 or self.last is None:
            return None
        return Window("steady", self.head[self.warmup], self.last)

    def trailing(self) -> Window | None:
        """The last `SPAN_S` seconds of records, or the steady window while that is shorter.
        The steady window's start read from `head` as `steady` takes it (no Window made for
        it: a replay's samples ask 2,000 times)."""
        last, records = self.last, self.records
        if records < 3 or last is None:
            return None
        warmup = records - 2  # `warmup`, the builtins written out: max(min(WARMUP, n - 2), 1)
        if warmup > WARMUP:
            warmup = WARMUP
        start = self.head[warmup]  # (records >= 3: at least 1)
        recent, horizon = self.recent, last[0] - SPAN_S
        while len(recent) > 1 and recent[1][0] <= horizon:
            recent.popleft()  # the horizon only moves on: these can never start a window again
        first = recent[0]
        if first[0] <= horizon and first[0] > start[0]:
            return Window("trailing", first, last)
        return Window("trailing", start, last)

    def spread(self) -> dict[str, Any] | None:
        """The steady window's step-time quantiles and blocks (None before three records)."""
        if self.steady() is None:
            return None
        early = self.head_intervals[self.warmup :]
        extra = [(s / k, k) for s, k, _, _ in early if s > 0]
        quantiles = self.durations.quantiles((0.1, 0.5, 0.9), extra)
        if quantiles is None:
            return None
        p10, p50, p90 = quantiles
        blocks = [[float(k), tok, s] for s, k, tok, _ in early] + [
            list(b) for b in self.blocks.blocks
        ]
        return {"p10_s": p10, "median_s": p50, "p90_s": p90, "blocks": blocks}
