"""`tm summary`'s budget and time groups: progress against the budget, the plan, where the wall
time went.
"""

from __future__ import annotations

from typing import Any

from ..snapread import get_dict
from .format import duration, metric, percent, si, si_unit
from .summary_blocks import _grid, _part_legend, _text, bar, time_bar
from .terminal import number


def budget(snap: dict[str, Any], width: int) -> list[Any]:
    out: list[Any] = []
    declared = get_dict(snap, "budget")
    progress = number(snap.get("progress"))
    if declared:
        line = [("budget ", ""), (f"{si(declared.get('value'))} {declared.get('unit')}", "bold"),
                f" ({declared.get('source')})"]
        if number(snap.get("budget_tokens")) is not None and declared.get("unit") != "tokens":
            line.append(f" = {si(snap['budget_tokens'])} tokens")
        out.append(_text(*line))
    if progress is not None:
        eta = number(snap.get("eta_s"))
        out.append(_text(bar(progress, max(min(width - 40, 40), 10)), " ",
                         (percent(progress), "bold"),
                         "   ETA " if eta is not None else "",
                         (duration(eta), "bold") if eta is not None else ""))
    required, remaining = number(snap.get("flops_required")), number(snap.get("flops_remaining"))
    if required is not None:
        rest = f", {si_unit(remaining, 'FLOP')} to go" if remaining is not None else ""
        out.append(_text(f"FLOPs {si_unit(snap.get('flops_spent'), 'FLOP')} of "
                         f"{si_unit(required, 'FLOP')}{rest}"))
    plan = get_dict(snap, "plan")
    if plan:
        rows: list[list[Any]] = []
        p = get_dict(plan, "mfu")
        if p is not None:
            measured = number(p.get("measured"))
            rows.append(["MFU", percent(p["planned"]) if number(p.get("planned")) is not None else "?",
                         percent(measured) if measured is not None else "-", p.get("convention") or ""])
        p = get_dict(plan, "tokens_per_s")
        if p is not None:
            rows.append(["tokens/s", si(p.get("planned")), si(p.get("measured")), ""])
        p = get_dict(plan, "hours")
        if p is not None:
            projected = number(p.get("projected"))
            planned = number(p.get("planned"))
            rows.append(["hours", metric(planned),
                         f"{metric(projected)} projected" if projected is not None else "-", ""])
        if rows:
            out.append(_text(("plan vs actual", "bold")))
            out.append(_grid(rows, header=["", "planned", "actual", ""]))
    return out


def time_split(snap: dict[str, Any], width: int) -> list[Any]:
    split = get_dict(snap, "time")
    if not split:
        return []
    parts = [p for p in split.get("parts") or [] if isinstance(p, dict)]
    head = [f"{duration(split.get('elapsed_s'))} elapsed"]
    if number(split.get("goodput")) is not None:
        head += ["   goodput ", (percent(split["goodput"]), "bold")]
    out: list[Any] = [_text(*head)]
    if parts:
        out.append(time_bar(parts, max(min(width - 4, 72), 10)))
        total = sum(number(p.get("s")) or 0.0 for p in parts)
        out.extend(_part_legend(p, total) for p in parts)
    if split.get("remainder_includes"):
        out.append(_text(("compute also holds: " + ", ".join(map(str, split["remainder_includes"])), "dim")))
    return out
