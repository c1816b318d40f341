"""The formulas, one small function each, so that a test can pin each against a value worked
out by hand. All utilizations are fractions 0..1; rates are per second; nothing here keeps state
except `MovingAverage`.
"""

from __future__ import annotations

from typing import Any

from ..snapread import finite

#: `x` as a float when it is a finite int or float (not a bool), else None: `snapread.finite`,
#: the one rule, under the name the engine's parts use.
num = finite


def by_gpu(item: tuple[str, Any]) -> tuple[int, int, str]:
    """Sort key for (GPU label, value) pairs: indices in number order (2 before 10), then UUIDs."""
    label = item[0]
    return (0, int(label), "") if label.isdigit() else (1, 0, label)


def mfu(flops_per_token: float, tokens_per_s: float, n_gpus: int, peak_flops: float) -> float:
    """Model FLOPs utilization: FLOPs per token x tokens/s over (GPUs x dense peak per GPU)."""
    return flops_per_token * tokens_per_s / (n_gpus * peak_flops)


def ofu(
    tensor_active: float,
    sm_clock_mhz: float,
    tensor_clock_mhz: float | None,
    max_sm_clock_mhz: float | None,
) -> tuple[float, bool] | None:
    """Observed FLOPs utilization from the GPU's counters, and whether it compares with MFU.

    With the tensor clock the dense peak is stated at, tensor activity runs at most at that
    clock: OFU = tensor_active x min(SM clock, tensor clock) / tensor clock, comparable with MFU.
    Without one, it is scaled to the max SM clock and is not comparable (the peak's clock is
    unknown). None when neither clock is known.
    """
    if tensor_clock_mhz:
        return tensor_active * min(sm_clock_mhz, tensor_clock_mhz) / tensor_clock_mhz, True
    if max_sm_clock_mhz:
        return tensor_active * min(sm_clock_mhz, max_sm_clock_mhz) / max_sm_clock_mhz, False
    return None


def arithmetic_intensity(ridge: float, mfu_value: float, dram_active: float) -> float:
    """FLOP per DRAM byte over the window: (MFU x peak) / (DRAM active x bandwidth)."""
    return ridge * mfu_value / dram_active


def eta_seconds(remaining: float, rate: float) -> float:
    """Seconds to finish `remaining` units at `rate` units/s; zero once the budget is met."""
    return max(remaining, 0.0) / rate


class MovingAverage:
    """An exponential moving average that ignores its first `skip` values.

    The first reports of a run carry compile and allocator warm-up; averaging them in would
    drag tokens/s down for minutes. `value` is None until a value past the warm-up arrives.
    """

    __slots__ = ("alpha", "skip", "seen", "value", "previous")

    def __init__(self, alpha: float = 0.2, skip: int = 0) -> None:
        self.alpha = alpha
        self.skip = skip
        self.seen = 0
        self.value: float | None = None
        self.previous: float | None = None  # the value before the latest update (to explain it)

    def update(self, x: float) -> None:
        self.seen += 1
        if self.seen <= self.skip:
            return
        value = self.previous = self.value
        self.value = x if value is None else value + self.alpha * (x - value)

    def update_many(self, xs: list[float]) -> None:
        """`update(x)` for each of `xs` in order, in one loop (the same values after it)."""
        seen, skip, alpha = self.seen, self.skip, self.alpha
        value, previous = self.value, self.previous
        for x in xs:
            seen += 1
            if seen <= skip:
                continue
            previous = value
            value = x if value is None else value + alpha * (x - value)
        self.seen, self.value, self.previous = seen, value, previous
