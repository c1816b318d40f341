"""How much two runs' rates differ, and how much of that a rerun would differ by anyway.

Two runs of one program on a busy machine differ by a few percent for no reason of their own;
a guard that compares two single numbers fails on that about half the time. Each run's steady
window is kept as up to 64 blocks of consecutive step intervals (`step_times.blocks` in the
snapshot, [steps, tokens, seconds] each). Resampling the blocks of each run with replacement
(a block bootstrap, with a fixed seed so the same logs always give the same answer) gives the
spread of the ratio of the two rates a rerun could show; its central 95% is the noise band.
Blocks of consecutive steps keep slow drifts (a neighbour's job starting) inside the noise.

A regression is a change worse than the allowed drop even at the favourable end of the band.
Standard library only.
"""

from __future__ import annotations

import random
from typing import Any

#: Resamples of each run; the band's ends are read at 2.5% and 97.5% of them.
RESAMPLES = 400
SEED = 0
#: Fewer blocks than this in either run: no band (too few to resample).
MIN_BLOCKS = 4

#: quantity -> (numerator index, denominator index) in a block [steps, tokens, seconds]
QUANTITIES = {"tokens_per_s": (1, 2), "step_time_s": (2, 0), "steps_per_s": (0, 2)}


def blocks_of(snap: dict[str, Any]) -> list[list[float]] | None:
    """A snapshot's steady-window blocks, or None when it has none (an older log)."""
    blocks = (snap.get("step_times") or {}).get("blocks")
    if not isinstance(blocks, list) or not blocks:
        return None
    out = []
    for b in blocks:
        if isinstance(b, list) and len(b) == 3 and all(isinstance(x, (int, float)) for x in b):
            out.append([float(x) for x in b])
    return out or None


def value_of(blocks: list[list[float]], quantity: str) -> float | None:
    top, bottom = QUANTITIES[quantity]
    num = sum(b[top] for b in blocks)
    den = sum(b[bottom] for b in blocks)
    return num / den if den > 0 and num > 0 else None


class Change:
    """run / baseline - 1 for one quantity, and the 95% band of that ratio a rerun could give.

    `low`, `high`: the band's ends as changes (run/base - 1); `noise`: its half-width."""

    __slots__ = ("run", "base", "change", "low", "high")

    def __init__(self, run: float, base: float, low: float, high: float) -> None:
        self.run, self.base = run, base
        self.change = run / base - 1.0
        self.low, self.high = low, high

    @property
    def noise(self) -> float:
        return (self.high - self.low) / 2.0

    def worse(self, higher_is_better: bool) -> tuple[float, float]:
        """(how much worse, how much worse at the favourable end of the band); > 0 is worse."""
        if higher_is_better:
            return -self.change, -self.high
        return self.change, self.low


def compare(
    base: list[list[float]],
    run: list[list[float]],
    quantity: str,
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> Change | None:
    """The change of `quantity` from `base` to `run`, with its noise band; None when either
    run has no value. With fewer than `MIN_BLOCKS` blocks in either, the band is zero wide."""
    a, b = value_of(base, quantity), value_of(run, quantity)
    if a is None or b is None:
        return None
    change = b / a - 1.0
    if len(base) < MIN_BLOCKS or len(run) < MIN_BLOCKS:
        return Change(b, a, change, change)
    rng = random.Random(seed)
    top, bottom = QUANTITIES[quantity]
    ratios = []
    for _ in range(resamples):
        x = _resampled(rng, base, top, bottom)
        y = _resampled(rng, run, top, bottom)
        if x and y:
            ratios.append(y / x)
    if not ratios:
        return Change(b, a, change, change)
    ratios.sort()
    lo = ratios[int(0.025 * (len(ratios) - 1))] - 1.0
    hi = ratios[int(round(0.975 * (len(ratios) - 1)))] - 1.0
    # the band is about the observed change: centre it there (the percentile band of a ratio
    # estimator is slightly off-centre on a few blocks)
    half = (hi - lo) / 2.0
    return Change(b, a, change - half, change + half)


def _resampled(rng: random.Random, blocks: list[list[float]], top: int, bottom: int) -> float:
    pick = rng.choices(blocks, k=len(blocks))
    den = sum(p[bottom] for p in pick)
    return sum(p[top] for p in pick) / den if den > 0 else 0.0
