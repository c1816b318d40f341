"""The step clock: steps, tokens and tokens/s, from rank 0's step records.

Why rank 0 alone: every data-parallel rank steps together, so one rank's records are the run's
clock and its token count times the data-parallel degree is the run's. Tokens per step are
always detected (so a declared value can be checked against them); a declared or emitted
`tokens_per_step` is what is counted when there is one. When step records carry `real_tokens`
(not padding), tokens/s and MFU use those; the padded count stays beside them.
"""

from __future__ import annotations

from typing import Any

from .formulas import MovingAverage, num

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

    def step(self, t: float, d: dict[str, Any]) -> None:
        k = d.get("k")
        k = k if isinstance(k, int) and not isinstance(k, bool) and k > 0 else 1
        tokens = num(d.get("tokens"))
        real = num(d.get("real_tokens"))
        n = d.get("n")
        if isinstance(n, int) and not isinstance(n, bool):
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
