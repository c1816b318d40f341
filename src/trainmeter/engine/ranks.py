"""Per-rank seconds per step, to find the rank that holds the others back.

Each rank's step records arrive on their own clock; the time between two of them divided by the
steps in between is that rank's step time (a moving average, the first interval skipped).
"""

from __future__ import annotations

from typing import Any

from .formulas import MovingAverage


class RankTimes:
    ALPHA = 0.2

    def __init__(self) -> None:
        self._prev: dict[int, float] = {}
        self._dt: dict[int, MovingAverage] = {}
        self._last: dict[int, tuple[float, int]] = {}  # (seconds, steps) of the latest interval

    def step(self, rank: int, t: float, k: int) -> None:
        prev = self._prev.get(rank)
        self._prev[rank] = t
        if prev is not None and t > prev:
            avg = self._dt.get(rank)
            if avg is None:
                avg = self._dt[rank] = MovingAverage(self.ALPHA, 1)
            avg.update((t - prev) / k)
            self._last[rank] = (t - prev, k)

    def step_time(self, rank: int) -> float | None:
        avg = self._dt.get(rank)
        return None if avg is None else avg.value

    def last_interval(self, rank: int) -> tuple[float, int] | None:
        return self._last.get(rank)

    def previous(self, rank: int) -> float | None:
        avg = self._dt.get(rank)
        return None if avg is None else avg.previous

    def snapshot(self) -> dict[str, Any] | None:
        """{step_time_s: {rank: s}, slowest, fastest, spread} with two or more ranks timed.

        spread = slowest / fastest - 1 (0.25: the slowest rank takes 25% longer a step).
        """
        times = {r: a.value for r, a in self._dt.items() if a.value}
        if len(times) < 2:
            return None
        slowest = max(times, key=lambda r: (times[r], -r))
        fastest = min(times, key=lambda r: (times[r], r))
        return {
            "step_time_s": {str(r): v for r, v in sorted(times.items())},
            "slowest": str(slowest),
            "fastest": str(fastest),
            "spread": times[slowest] / times[fastest] - 1.0,
        }
