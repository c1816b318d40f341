"""Plain-text views of a snapshot: the one line `tm` prints at the end, and `tm summary`.

Numbers are short and SI-scaled (1.2M tokens, 35.1k tok/s) because a person reads them at a
glance; the exact values are in `summary.json`. MFU is never shown without its convention, and
when no convention was chosen the range over all of them is shown (promise 4). A number the
engine left absent is not printed as zero: the line leaves it out, the long view gives the reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .insight_text import insight_lines
from .node_text import node_text

_SCALES = ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k"))


def si(value: float | int | None) -> str:
    """1234567 -> '1.2M', 35123 -> '35.1k', 123456 -> '123k', 950 -> '950', 0.5 -> '0.5'."""
    if value is None:
        return "?"
    v = float(value)
    for scale, suffix in _SCALES:
        if abs(v) >= scale * 0.9995:
            scaled = v / scale
            return f"{scaled:.0f}{suffix}" if abs(scaled) >= 99.95 else f"{scaled:.1f}{suffix}"
    if v == int(v):
        return str(int(v))
    return f"{v:.3g}"


def duration(seconds: float | None) -> str:
    """12.3 -> '12.3s', 303 -> '5m03s', 7500 -> '2h05m'."""
    if seconds is None:
        return "?"
    s = max(float(seconds), 0.0)
    if s < 60:
        return f"{s:.1f}s"
    if s < 3600:
        m, rest = divmod(int(round(s)), 60)
        return f"{m}m{rest:02d}s"
    h, rest = divmod(int(round(s)), 3600)
    return f"{h}h{rest // 60:02d}m"


def percent(fraction: float) -> str:
    """One decimal for ordinary values; a tiny one keeps two significant digits, never 0.0%."""
    value = 100 * fraction
    if value == 0 or abs(value) >= 0.1:
        return f"{value:.1f}%"
    return f"{value:.2g}%"


def mfu_text(snap: dict[str, Any]) -> str | None:
    """'MFU 38.1% (titan)', or 'MFU 36.8-42.2% by convention', or None when absent."""
    mfu = snap.get("mfu")
    if not isinstance(mfu, dict):
        return None
    if isinstance(mfu.get("value"), (int, float)):
        return f"MFU {percent(mfu['value'])} ({mfu.get('convention') or 'convention unknown'})"
    rng = mfu.get("range")
    if isinstance(rng, (list, tuple)) and len(rng) == 2:
        return f"MFU {percent(rng[0])[:-1]}-{percent(rng[1])} by convention"
    return None


def _elapsed(snap: dict[str, Any]) -> float | None:
    time_split = snap.get("time")
    return time_split.get("elapsed_s") if isinstance(time_split, dict) else None


def summary_line(
    snap: dict[str, Any], run_dir: Path | str | None, elapsed_s: float | None = None
) -> str:
    """The one line on stderr when a run ends. `elapsed_s` stands in when the engine had none."""
    elapsed = _elapsed(snap)
    parts = [duration(elapsed if elapsed is not None else elapsed_s)]
    if isinstance(snap.get("steps"), (int, float)):
        parts.append(f"{si(snap['steps'])} steps")
    if isinstance(snap.get("tokens_seen"), (int, float)) and snap["tokens_seen"]:
        parts.append(f"{si(snap['tokens_seen'])} tokens")
    if isinstance(snap.get("tokens_per_s"), (int, float)):
        parts.append(f"{si(snap['tokens_per_s'])} tok/s")
    mfu = mfu_text(snap)
    if mfu:
        parts.append(mfu)
    node = node_text(snap)  # one node of a multi-node job: say which (views/node_text.py)
    if node:
        parts.append(node)
    where = f"run {run_dir}" if run_dir else "no run log"
    return f"trainmeter: {', '.join(parts)}; {where}"


def _series_lines(series: Any) -> list[str]:
    if not isinstance(series, dict) or not series:
        return []
    lines = ["series (last value):"]
    for name, entry in sorted(series.items()):
        if not isinstance(entry, dict):
            continue
        value = entry.get("value")
        shown = f"{value:.4g}" if isinstance(value, (int, float)) else str(value)
        via = entry.get("via") or entry.get("source") or ""
        lines.append(f"  {name} = {shown}  ({entry.get('count', '?')} values, {via})")
    return lines


def _time_lines(time_split: Any) -> list[str]:
    if not isinstance(time_split, dict):
        return []
    head = f"time: {duration(time_split.get('elapsed_s'))} elapsed"
    if isinstance(time_split.get("goodput"), (int, float)):
        head += f", goodput {percent(time_split['goodput'])}"
    lines = [head]
    for part in time_split.get("parts") or []:
        if not isinstance(part, dict):
            continue
        seconds = part.get("s")
        shown = duration(seconds) if isinstance(seconds, (int, float)) else "not measured"
        lines.append(f"  {part.get('label') or part.get('name')}: {shown}")
    return lines


def summary_text(snap: dict[str, Any], source: str | None = None) -> str:
    """A few lines for `tm summary`: progress, throughput, MFU, time split, series, caveats."""
    lines: list[str] = []
    if source:
        lines.append(f"run {source}")
    node = node_text(snap)
    if node:
        lines.append(f"{node}, job {(snap.get('job') or {}).get('run_id') or '(no run id)'}")
    head = [f"{si(snap.get('steps'))} steps"]
    if isinstance(snap.get("tokens_seen"), (int, float)):
        head.append(f"{si(snap['tokens_seen'])} tokens")
    if isinstance(snap.get("tokens_per_s"), (int, float)):
        head.append(f"{si(snap['tokens_per_s'])} tok/s")
    if isinstance(snap.get("step_time_s"), (int, float)):
        head.append(f"{snap['step_time_s'] * 1000:.1f} ms/step")
    if isinstance(snap.get("progress"), (int, float)):
        head.append(f"{percent(snap['progress'])} of budget")
    lines.append(", ".join(head))
    mfu = mfu_text(snap)
    absent = snap.get("absent") if isinstance(snap.get("absent"), dict) else {}
    if mfu:
        lines.append(mfu)
    elif "mfu" in absent:
        lines.append(f"MFU absent: {absent['mfu']}")
    lines.extend(_time_lines(snap.get("time")))
    lines.extend(insight_lines(snap))  # samples, MFU waterfall, advice (views/insight_text.py)
    lines.extend(_series_lines(snap.get("series")))
    for warning in snap.get("warnings") or []:
        lines.append(f"warning: {warning}")
    if absent:
        lines.append("absent:")
        for name, reason in sorted(absent.items()):
            lines.append(f"  {name}: {reason}")
    return "\n".join(lines)
