"""GPU energy from NVML's total-energy counter: joules per GPU, summed, and per token.

The counter is cumulative since the driver loaded. Energy over the run is the latest reading
less the first, per GPU. A reading below the previous one means the counter restarted (driver
reload, GPU reset): that reading becomes a new baseline, so the unknown interval is left out
rather than guessed, and the restart is counted.
"""

from __future__ import annotations

from typing import Any

from .formulas import by_gpu, num


class _Meter:
    __slots__ = ("last", "joules", "resets")

    def __init__(self) -> None:
        self.last: float | None = None
        self.joules = 0.0
        self.resets = 0

    def read(self, value: float) -> None:
        last = self.last
        if last is not None:
            if value >= last:
                self.joules += value - last
            else:
                self.resets += 1
        self.last = value


class EnergyMeter:
    def __init__(self) -> None:
        self._meters: dict[Any, _Meter] = {}
        self._labels: dict[Any, str] = {}

    def read(self, ident: Any, label: str, value: Any) -> None:
        value = num(value)
        if value is None:
            return
        meter = self._meters.get(ident)
        if meter is None:
            meter = self._meters[ident] = _Meter()
            self._labels[ident] = label
        meter.read(value)

    def snapshot(self, tokens: float) -> dict[str, Any] | None:
        """{joules, per_gpu, joules_per_token, resets, source} or None with no reading."""
        if not self._meters:
            return None
        per_gpu = {self._labels[i]: m.joules for i, m in self._meters.items()}
        joules = sum(per_gpu.values())
        out: dict[str, Any] = {
            "joules": joules,
            "per_gpu": dict(sorted(per_gpu.items(), key=by_gpu)),
            "resets": sum(m.resets for m in self._meters.values()),
            "source": "NVML total energy counter, latest less first reading per GPU",
        }
        if tokens > 0:
            out["joules_per_token"] = joules / tokens
        return out
