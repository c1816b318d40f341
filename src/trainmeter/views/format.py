"""How a number reads, for every view: counts, units, durations, percentages, one rule.

The rule for digits: at most three significant digits and at least one decimal below 100 once
a value is scaled (1.2M, 35.1k, 123k), one decimal for a percentage (42.0%, 0.4%) unless it is
tiny (0.042%, never 0.0%), tenths of a second below a minute, then minutes and seconds, hours and
minutes, days and hours. A number the engine left absent reads `?`: never zero.
"""

from __future__ import annotations

import math

from ..snapread import finite as number

_SCALES = ((1e15, "P"), (1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k"))
_UNIT_SCALES = (
    (1e15, "P"),
    (1e12, "T"),
    (1e9, "G"),
    (1e6, "M"),
    (1e3, "k"),
    (1.0, ""),
    (1e-3, "m"),
    (1e-6, "µ"),
    (1e-9, "n"),
)


def si(value: float | int | None) -> str:
    """1234567 -> '1.2M', 35123 -> '35.1k', 123456 -> '123k', 950 -> '950', 0.5 -> '0.5'."""
    v = number(value)
    if v is None:
        return "?"
    if abs(v) < 1e15:
        scales = _SCALES[1:]
    else:
        scales = _SCALES
    for scale, suffix in scales:
        if abs(v) >= scale * 0.9995:
            scaled = v / scale
            return f"{scaled:.0f}{suffix}" if abs(scaled) >= 99.95 else f"{scaled:.1f}{suffix}"
    if v == int(v):
        return str(int(v))
    return f"{v:.3g}"


def si_unit(value: float | int | None, unit: str) -> str:
    """A value with a metric prefix on its unit: 1403 J -> '1.40 kJ', 0.00685 -> '6.85 mJ';
    bytes in binary units, as the dashboard and the report show them: 2**31 B -> '2.00 GiB'."""
    v = number(value)
    if v is None:
        return "?"
    if v == 0:
        return f"0 {unit}"
    if unit == "B":  # memory and disk in one family everywhere: KiB, MiB, GiB, TiB
        for scale, prefix in ((2**40, "Ti"), (2**30, "Gi"), (2**20, "Mi"), (2**10, "Ki")):
            if abs(v) >= scale * 0.9995:
                return f"{_three(v / scale)} {prefix}B"
        return f"{v:.0f} B"
    for scale, prefix in _UNIT_SCALES:
        if abs(v) >= scale * 0.9995:
            return f"{_three(v / scale)} {prefix}{unit}"
    return f"{v:.3g} {unit}"


def _three(x: float) -> str:
    """Three significant digits, trailing zeros kept: 1.403 -> '1.40', 14.03 -> '14.0', 140.3 -> '140'."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    decimals = max(0, 2 - math.floor(math.log10(abs(float(f"{x:.3g}")))))
    return f"{x:.{decimals}f}"


def duration(seconds: float | None) -> str:
    """12.3 -> '12.3s', 303 -> '5m03s', 7500 -> '2h05m', 200000 -> '2d07h'."""
    s = number(seconds)
    if s is None:
        return "?"
    s = max(s, 0.0)
    if 0 < s < 0.05:
        return f"{s * 1000:.0f}ms" if s >= 0.0005 else f"{s * 1000:.2g}ms"
    if s < 60:
        return f"{s:.1f}s"
    if s < 3600:
        m, rest = divmod(int(round(s)), 60)
        return f"{m}m{rest:02d}s"
    if s < 86400:
        h, rest = divmod(int(round(s)), 3600)
        return f"{h}h{rest // 60:02d}m"
    d, rest = divmod(int(round(s)), 86400)
    return f"{d}d{rest // 3600:02d}h"


def percent(fraction: float) -> str:
    """One decimal for ordinary values; a tiny one keeps two significant digits, never 0.0%."""
    value = 100 * fraction
    if value == 0 or abs(value) >= 0.1:
        return f"{value:.1f}%"
    return f"{value:.2g}%"


def fixed(value: float, places: int = 3) -> str:
    """`places` decimals, but a non-zero number too small for them in scientific notation:
    0.25 -> '0.250', 0.00001234 -> '1.23e-05', never '0.000'."""
    if value != 0 and abs(value) < 0.5 * 10.0**-places:
        return f"{value:.2e}"
    return f"{value:.{places}f}"


def ms(seconds: float | None) -> str:
    """A step time: 0.01481 -> '14.8 ms', 2.5 -> '2.50 s', 2e-8 -> '2.00e-05 ms'."""
    s = number(seconds)
    if s is None:
        return "?"
    return f"{fixed(s * 1000, 1)} ms" if s < 1 else f"{s:.2f} s"
