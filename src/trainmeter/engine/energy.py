"""GPU energy from NVML's total-energy counter: joules per GPU, summed, and per token.

The counter is cumulative since the driver loaded. Energy over the run is the latest reading
less the first, per GPU. A reading below the previous one means the counter restarted (driver
reload, GPU reset): that reading becomes a new baseline, so the unknown interval is left out
rather than guessed, and the restart is counted.
"""

from __future__ import annotations

from typing import Any

from . import explain
from .formulas import by_gpu, num
from .section import Section


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

    def section(
        self,
        covered: list[Any] | None,
        tokens_seen: float | None,
        unavailable: str | None,
        detail: bool = True,
    ) -> Section:
        """energy: {joules, per_gpu, joules_per_token, resets, source} over the covered GPUs
        (None: every GPU read), the same GPUs MFU divides by (`detail` False: the explanation
        left out, for `Engine.sample`)."""
        out = Section()
        idents = [i for i in (self._meters if covered is None else covered) if i in self._meters]
        if not idents:
            out.absent["energy"] = unavailable or "no GPU energy counter reading yet"
            return out
        per_gpu = {self._labels[i]: self._meters[i].joules for i in idents}
        joules = sum(per_gpu.values())
        entry: dict[str, Any] = {
            "joules": joules,
            "per_gpu": dict(sorted(per_gpu.items(), key=by_gpu)),
            "resets": sum(self._meters[i].resets for i in idents),
            "source": "NVML total energy counter, latest less first reading per GPU",
        }
        if tokens_seen is None:
            out.absent["energy.joules_per_token"] = "the tokens seen are not counted"
        elif tokens_seen <= 0:
            out.absent["energy.joules_per_token"] = "no token counted yet"
        else:
            entry["joules_per_token"] = joules / tokens_seen
        if detail and "joules_per_token" in entry:
            labels = ", ".join(sorted(per_gpu, key=lambda k: by_gpu((k, 0))))
            out.explain["energy_per_token"] = explain.explanation(
                entry["joules_per_token"], "J/token", "joules / tokens_seen",
                [
                    explain.given("joules", joules, "J",
                                  f"measured: NVML total-energy counter of GPUs {labels}, latest "
                                  "less first reading, summed"),
                    explain.given("tokens_seen", tokens_seen, "tokens", "see tokens_seen"),
                ],
                note="GPU energy only: not the CPU, memory, network or cooling",
            )
        out.values["energy"] = entry
        return out
