"""How numbers read in the terminal, and the one line `tm` prints when a run ends.

Numbers are short and SI-scaled (1.2M tokens, 35.1k tok/s) because a person reads them at a
glance; the exact values are in `summary.json`. MFU is never shown without its convention, and
when no convention was chosen the range over all of them is shown. A number the engine left
absent is not printed as zero: the line leaves it out, `tm summary` gives the reason.

The number formatters every view shares (`si`, `percent`, `duration`, ...) are in `format.py`,
so that one number reads the same everywhere.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..snapread import finite as number
from ..visible import visible
from .format import duration, metric, percent, si
from .node_text import node_text


def loss_text(value: Any) -> str:
    """A value the loop logs, by the one rule (`readable.metric`): 0.3877, 2.046, 3.0e-4."""
    return metric(value)


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
    training loss, the straggler named at the end, the alert count, then where the run log is.
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
    from .straggler_text import end_phrase as straggler_phrase

    slow = straggler_phrase(snap)  # the rank the others wait for (views/straggler_text.py)
    if slow:
        parts.append(slow)
    n_alerts = len(alerts(snap))
    if n_alerts:
        parts.append(plural(n_alerts, "alert") + " (tm summary)")
    node = node_text(snap)  # one node of a multi-node job: say which (views/node_text.py)
    if node:
        parts.append(node)
    where = f"run {run_dir}" if run_dir else "no run log"
    died = death_text(snap)
    head = f"{died}; " if died else ""
    # the run's own text (a crash message, a name, a path) reaches the terminal as characters
    return visible(f"trainmeter: {head}{', '.join(parts)}; {where}", newlines=False)


def death_text(snap: dict[str, Any]) -> str | None:
    """Why the run died, in words ("crashed: CUDA out of memory (rank 3)"), or None."""
    death = snap.get("death")
    text = death.get("text") if isinstance(death, dict) else None
    return text if isinstance(text, str) and text else None

