"""How a number reads in the views: the one rule of `trainmeter.readable`, under the name the
views have always imported it by (the engine's messages read it from `readable` directly)."""

from __future__ import annotations

from ..readable import (
    ABSENT,
    amount,
    duration,
    fixed,
    fixed_places,
    mantissa,
    metric,
    ms,
    percent,
    si,
    si_unit,
)

__all__ = ["ABSENT", "amount", "duration", "fixed", "fixed_places", "mantissa", "metric", "ms", "percent",
           "si", "si_unit"]
