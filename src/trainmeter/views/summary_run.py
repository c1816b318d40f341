"""`tm summary`'s head: which run, how it ended, when and where it ran, the command, how it died."""

from __future__ import annotations

from typing import Any

from ..snapread import get, get_dict, get_number
from .format import duration
from .memory_text import death_lines
from .node_text import node_text
from .summary_blocks import _text
from .terminal import number


def header(snap: dict[str, Any], source: str | None) -> list[Any]:
    run = get_dict(snap, "run") or {}
    head = [(str(run.get("name") or "run"), "bold")]
    if run.get("exit_status") is not None or snap.get("time", {}).get("finished"):
        status = run.get("exit_status")
        death = get_dict(snap, "death") or {}
        if death.get("text"):
            head.append((f"  {death['text']}", "red"))
        elif run.get("signal"):
            head.append((f"  killed by signal {run['signal']}", "red"))
        elif status not in (None, 0):
            head.append((f"  exit {status}", "red"))
        else:
            head.append(("  finished", "green"))
    elif snap:
        head.append(("  running (or cut short)", "yellow"))
    elapsed = get_number(snap, "time.elapsed_s")
    if elapsed is not None:
        head.append(f"  {duration(elapsed)}")
    started = number(run.get("unix_time"))
    if started is not None:
        from datetime import datetime, timezone

        when = datetime.fromtimestamp(started, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        head.append((f"  started {when}", "dim"))
    if run.get("hostname"):
        head.append((f" on {run['hostname']}", "dim"))
    lines = [_text(*head)]
    node = node_text(snap)  # one node of a multi-node job (views/node_text.py)
    if node:
        job = get_dict(snap, "job") or {}
        lines.append(_text((f"{node}, job {job.get('run_id') or '(no run id)'}", "bold")))
    observe = get(snap, "facts.observe_only")
    if isinstance(observe, dict) and observe.get("value"):
        lines.append(_text(("observe-only: ", "bold yellow"), str(observe["value"])))
    if isinstance(run.get("argv"), list) and run["argv"]:
        import shlex

        lines.append(_text(("command ", "dim"), shlex.join(str(a) for a in run["argv"])))
    if source:
        lines.append(_text(("run ", "dim"), source))
    lines.extend(_text(("died ", "bold red"), line) for line in death_lines(snap))
    return lines
