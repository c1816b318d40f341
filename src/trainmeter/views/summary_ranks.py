"""`tm summary`'s ranks group: each rank's step time and, where the ranks reported their waits
in collectives, each step split into compute and waiting for the others, and the straggler
named (or the rule that names none)."""

from __future__ import annotations

from typing import Any

from ..snapread import get_dict
from .format import ms, percent
from .straggler_text import rank_rows, verdict
from .summary_blocks import _grid, _text
from .terminal import number


def ranks_title(snap: dict[str, Any]) -> str:
    if rank_rows(snap):
        return "Ranks (a step: computing, and waiting for the others in collectives)"
    return "Ranks (step time)"


def ranks(snap: dict[str, Any]) -> list[Any]:
    split = rank_rows(snap)
    if split:
        # in a synchronous job every rank's step lasts as long: the split tells them apart
        out: list[Any] = [_grid([["", "step", "compute", "waits for the others", "share"]] + [
            [f"rank {rank}", step, compute, wait, share]
            for rank, step, compute, wait, share in split
        ])]
        line = verdict(snap)
        if line:
            out.append(_text((line, "bold red" if get_dict(snap, "straggler") else "")))
        return out
    return _step_times(snap)


def _step_times(snap: dict[str, Any]) -> list[Any]:
    entry = get_dict(snap, "ranks")
    if not entry or get_dict(entry, "step_time_s") is None:
        return []
    slowest, fastest = str(entry.get("slowest")), str(entry.get("fastest"))
    rows = []
    for rank, s in entry["step_time_s"].items():
        mark = ("slowest", "bold red") if rank == slowest else ("fastest", "green") if rank == fastest else ""
        rows.append([f"rank {rank}", ms(s), _text(mark) if mark else ""])
    out: list[Any] = [_grid(rows)]
    if number(entry.get("spread")) is not None:
        out.append(_text("spread ", (percent(entry["spread"]), "bold"),
                         f" (rank {slowest} is that much slower than rank {fastest})"))
    return out
