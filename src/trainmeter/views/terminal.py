"""How numbers read in the terminal, and the one line `tm` prints when a run ends.

Numbers are short and SI-scaled (1.2M tokens, 35.1k tok/s) because a person reads them at a
glance; the exact values are in `summary.json`. MFU is never shown without its convention, and
when no convention was chosen the range over all of them is shown. A number the engine left
absent is not printed as zero: the line leaves it out, `tm summary` gives the reason.

The formatters here are shared by every terminal view (`tm summary`, the live status line,
`tm top`) so that one number reads the same everywhere.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from .node_text import node_text

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


def number(value: Any) -> float | None:
    """A finite float, or None for anything else (absent is never zero)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    v = float(value)
    return v if math.isfinite(v) else None


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


def loss_text(value: Any) -> str:
    v = number(value)
    return "?" if v is None else f"{v:.4g}"


def mfu_text(snap: dict[str, Any]) -> str | None:
    """'MFU 38.1% (titan)', or 'MFU 36.8-42.2% by convention', or None when absent."""
    mfu = snap.get("mfu")
    if not isinstance(mfu, dict):
        return None
    if number(mfu.get("value")) is not None:
        named = mfu.get("convention") or "convention unknown"
        if isinstance(mfu.get("precision"), str):  # the matmuls' precision (MFU stays vs BF16)
            named += f", {mfu['precision']}"
        return f"MFU {percent(mfu['value'])} ({named})"
    rng = mfu.get("range")
    if isinstance(rng, (list, tuple)) and len(rng) == 2:
        return f"MFU {percent(rng[0])[:-1]}-{percent(rng[1])} by convention"
    return None


def ofu_value(snap: dict[str, Any]) -> float | None:
    """OFU (all GPUs, from the tensor-activity counters), or None when not counted."""
    ofu = snap.get("ofu")
    return number(ofu.get("value")) if isinstance(ofu, dict) else None


def ofu_text(snap: dict[str, Any]) -> str | None:
    value = ofu_value(snap)
    return None if value is None else f"OFU {percent(value)}"


def train_loss(snap: dict[str, Any]) -> float | None:
    """The last training loss the loop reported (canonical `train_loss`), or None."""
    series = snap.get("series")
    if not isinstance(series, dict):
        return None
    entry = series.get("train_loss")
    return number(entry.get("value")) if isinstance(entry, dict) else None


def rate_window_label(snap: dict[str, Any]) -> str | None:
    """Which window the rates are over, in a few words: 'last 30 s' while the run goes on (the
    trailing window, or its actual seconds while the run is shorter), 'steady' once it has
    ended (end of warm-up to the last step); None without a `rate_window` (see docs/rates.md)."""
    window = snap.get("rate_window")
    if not isinstance(window, dict):
        return None
    if window.get("kind") == "steady":
        return "steady"
    seconds, span = number(window.get("seconds")), number(window.get("span_s"))
    if window.get("kind") != "trailing" or seconds is None:
        return None
    shown = span if span is not None and seconds >= span else seconds
    return f"last {shown:.0f} s" if shown >= 10 else f"last {shown:.2g} s"


def alerts(snap: dict[str, Any]) -> list[dict[str, Any]]:
    return [a for a in snap.get("alerts") or [] if isinstance(a, dict)]


def run_elapsed(snap: dict[str, Any]) -> float | None:
    time_split = snap.get("time")
    return number(time_split.get("elapsed_s")) if isinstance(time_split, dict) else None


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def summary_line(
    snap: dict[str, Any], run_dir: Path | str | None, elapsed_s: float | None = None
) -> str:
    """The one line on stderr when a run ends. `elapsed_s` stands in when the engine had none.

    Elapsed, steps, tokens, tokens/s, MFU with its convention, OFU where counted, the last
    training loss, the alert count, then where the run log is.
    """
    measured = run_elapsed(snap)
    parts = [duration(measured if measured is not None else elapsed_s)]
    if number(snap.get("steps")) is not None:
        parts.append(f"{si(snap['steps'])} steps")
    if number(snap.get("tokens_seen")):
        parts.append(f"{si(snap['tokens_seen'])} tokens")
    if number(snap.get("tokens_per_s")) is not None:
        parts.append(f"{si(snap['tokens_per_s'])} tok/s")
    for text in (mfu_text(snap), ofu_text(snap)):
        if text:
            parts.append(text)
    loss = train_loss(snap)
    if loss is not None:
        parts.append(f"loss {loss_text(loss)}")
    from .memory_text import end_phrase

    memory = end_phrase(snap)
    if memory:
        parts.append(memory)
    n_alerts = len(alerts(snap))
    if n_alerts:
        parts.append(plural(n_alerts, "alert") + " (tm summary)")
    node = node_text(snap)  # one node of a multi-node job: say which (views/node_text.py)
    if node:
        parts.append(node)
    where = f"run {run_dir}" if run_dir else "no run log"
    died = death_text(snap)
    head = f"{died}; " if died else ""
    return f"trainmeter: {head}{', '.join(parts)}; {where}"


def death_text(snap: dict[str, Any]) -> str | None:
    """Why the run died, in words ("crashed: CUDA out of memory (rank 3)"), or None."""
    death = snap.get("death")
    text = death.get("text") if isinstance(death, dict) else None
    return text if isinstance(text, str) and text else None

