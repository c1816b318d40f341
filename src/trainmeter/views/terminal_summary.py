"""`tm summary` in the terminal: everything the snapshot holds, grouped the way a person asks.

Throughput, FLOPs per token, MFU, the GPUs (ladder, OFU, counters), energy, budget and plan,
where the wall time went, ranks, series, alerts, warnings, what is absent and why, then the
explanation of each derived number when the snapshot carries one. Each group is a small function
that returns nothing when the snapshot has nothing for it, so a CPU run, a crashed run and a
snapshot from an older engine all render. Every number is formatted by `views.terminal`, so it
reads the same here, in the end-of-run line and in the live views.
"""

from __future__ import annotations

import io
import re
from typing import Any

from .insight_text import (
    advice_lines,
    models_lines,
    samples_lines,
    waterfall_lines,
    waterfall_title,
)
from .memory_text import memory_lines
from .summary_blocks import _text
from .summary_explain import explain
from .summary_gpus import energy, gpus
from .summary_ranks import ranks, ranks_title
from .summary_records import absent, alert_lines, facts, node, series, warnings
from .summary_run import header
from .summary_speed import flops, mfu, throughput
from .summary_time import budget, time_split
from .terminal import alerts, number

Section = tuple[str, list[Any]]  # (title, renderables)


def _plain(lines: list[str]) -> list[Any]:
    """Lines of `views/insight_text.py` as Text (never parsed as rich markup)."""
    return [_text(line) for line in lines if line.strip()]


def _samples_title(snap: dict[str, Any]) -> str:
    """What the samples section is: the measure of a model without tokens, or samples counted
    beside the tokens of one that has them."""
    if number(snap.get("tokens_seen")) or number(snap.get("tokens_per_s")):
        return "Samples (beside the tokens: batch rows per step and per second)"
    return "Samples (a model without tokens)"


def sections(snap: dict[str, Any], width: int) -> list[Section]:
    """The groups in reading order; empty ones are dropped by the renderer."""
    n_alerts = len(alerts(snap))
    n_absent = len(snap.get("absent") or {})
    return [
        (f"Alerts ({n_alerts})", alert_lines(snap)),  # first: what is wrong comes before numbers
        ("Throughput", throughput(snap)),
        ("FLOPs per token", flops(snap)),
        ("Models trained together", _plain(models_lines(snap))),
        ("MFU", mfu(snap)),
        ("GPUs: utilization ladder and OFU", gpus(snap)),
        ("Energy", energy(snap)),
        ("Budget, progress, plan", budget(snap, width)),
        ("Where the time went", time_split(snap, width)),
        (_samples_title(snap), _plain(samples_lines(snap))),
        (waterfall_title(snap), _plain(waterfall_lines(snap))),
        ("What to try", _plain(advice_lines(snap))),
        (ranks_title(snap), ranks(snap)),
        ("Memory (per rank)", _plain(memory_lines(snap))),
        ("Series (last value)", series(snap)),
        ("Warnings", warnings(snap)),
        ("Facts (value, provenance)", facts(snap)),
        ("Host and node", node(snap)),
        (f"Absent ({n_absent}): what would enable each", absent(snap, width)),
        ("How each number was worked out", explain(snap)),
    ]


def renderables(snap: dict[str, Any], width: int) -> list[Any]:
    """The groups under their titles, each body indented two columns."""
    from rich.padding import Padding

    out: list[Any] = []
    for title, body in sections(snap, width):
        if not body:
            continue
        style = "bold red" if title.startswith("Alerts") else "bold cyan"
        out.append(_text(""))
        out.append(_text((title, style)))
        out.extend(Padding(item, (0, 0, 0, 2), expand=False) for item in body)
    return out


_TRAILING = re.compile(r"[ ]+((?:\x1b\[[0-9;]*m)*)$")


def render(console: Any, snap: dict[str, Any], source: str | None) -> None:
    """Print the summary on `console`, without the blanks tables pad their lines with."""
    with console.capture() as capture:
        for item in header(snap, source):
            console.print(item, soft_wrap=True)  # a long run path stays one line
        for item in renderables(snap, console.width):
            console.print(item, overflow="fold")
    text = capture.get()
    lines = [_TRAILING.sub(r"\1", line) for line in text.split("\n")]
    console.file.write("\n".join(lines))


def render_plain(snap: dict[str, Any], source: str | None, width: int = 100) -> str:
    from .terminal_console import make_console

    buf = io.StringIO()
    console = make_console(buf, width=width, colour=False)
    render(console, snap, source)
    return buf.getvalue().rstrip("\n")


def summary_text(snap: dict[str, Any], source: str | None = None, width: int = 100) -> str:
    """`tm summary` as plain text (no colour): what a pipe or a file gets."""
    return render_plain(snap, source, width=width)
