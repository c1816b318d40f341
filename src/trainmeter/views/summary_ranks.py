"""`tm summary`'s ranks group: each rank's step time, the slowest and fastest named."""

from __future__ import annotations

from typing import Any

from ..snapread import get_dict
from .format import ms, percent
from .summary_blocks import _grid, _text
from .terminal import number


def ranks(snap: dict[str, Any]) -> list[Any]:
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
