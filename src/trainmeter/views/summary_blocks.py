"""The pieces every terminal screen draws with: styled text, borderless grids, bars, the time split.

`tm summary` and `tm top` share them, so a bar, a glyph of the time split or a ladder column
reads the same on both screens.
"""

from __future__ import annotations

from typing import Any

from .format import duration, percent
from .terminal import number

# The time split, one glyph and colour a part, so the bar reads without colour too.
PART_STYLE: dict[str, tuple[str, str]] = {
    "startup": ("▓", "magenta"),
    "data": ("▒", "red"),
    "checkpoint": ("▚", "yellow"),
    "eval": ("▞", "cyan"),
    "compute": ("█", "green"),
    "after": ("░", "blue"),
}
_OTHER_PART = ("▪", "white")


LADDER_COLUMNS = (
    ("gpu_util", "GPU-Util"),
    ("sm_active", "SM active"),
    ("tensor_active", "Tensor active"),
    ("ofu", "OFU"),
    ("mfu", "MFU"),
)


def _text(*parts: Any):
    """A rich Text from (string, style) pairs and plain strings."""
    from rich.text import Text

    out = Text()
    for part in parts:
        if isinstance(part, tuple):
            out.append(part[0], style=part[1])
        elif part:
            out.append(str(part))
    return out


def _grid(rows: list[list[Any]], *, header: list[str] | None = None, pad: int = 2, whole: int = 2):
    """Aligned columns without borders (a table a pipe can read too). The first `whole` columns
    (names and numbers) never wrap; the others (text) wrap in their column."""
    from rich.table import Table

    n = max((len(r) for r in rows), default=0)
    table = Table(
        show_header=header is not None,
        header_style="bold",
        box=None,
        pad_edge=False,
        padding=(0, pad, 0, 0),
        show_edge=False,
    )
    for i in range(n):
        table.add_column((header or [""] * n)[i] if header else "", no_wrap=i < whole)
    for row in rows:
        table.add_row(*[r if r is not None else "" for r in row] + [""] * (n - len(row)))
    return table


def bar(fraction: float, width: int, style: str = "green") -> Any:
    """A progress bar of `width` cells: full blocks, one partial block, then light shade."""
    f = min(max(fraction, 0.0), 1.0)
    eighths = int(round(f * width * 8))
    full, rest = divmod(eighths, 8)
    partial = " ▏▎▍▌▋▊▉"[rest] if rest and full < width else ""
    empty = width - full - len(partial)
    return _text(("█" * full + partial, style), ("░" * empty, "dim"))


def time_bar(parts: list[dict[str, Any]], width: int) -> Any:
    """The time split as one bar: each part a run of its glyph, in proportion to its seconds."""
    shown = [(p, number(p.get("s"))) for p in parts if isinstance(p, dict)]
    shown = [(p, s) for p, s in shown if s is not None and s > 0]
    total = sum(s for _, s in shown)
    if total <= 0 or width <= 0:
        return _text(("(nothing measured yet)", "dim"))
    # largest-remainder rounding, so the cells add up to the width exactly
    raw = [s / total * width for _, s in shown]
    cells = [int(r) for r in raw]
    order = sorted(range(len(raw)), key=lambda i: raw[i] - cells[i], reverse=True)
    for i in order[: width - sum(cells)]:
        cells[i] += 1
    pieces = []
    for (part, _), n in zip(shown, cells, strict=True):
        glyph, style = PART_STYLE.get(str(part.get("name")), _OTHER_PART)
        pieces.append((glyph * n, style))
    return _text(*pieces)


def _part_legend(part: dict[str, Any], total: float | None) -> Any:
    glyph, style = PART_STYLE.get(str(part.get("name")), _OTHER_PART)
    label = part.get("label") or part.get("name")
    s = number(part.get("s"))
    if s is None or (not s and part.get("reason")):  # a zero nobody timed is not a measured one
        why = f" ({part['reason']})" if part.get("reason") else ""
        return _text((glyph, style), f" {label}: ", (f"not measured{why}", "dim"))
    share = f" {percent(s / total)}" if total else ""
    how = "" if part.get("measured", True) else " (the rest)"
    count = f", {part['n']}×" if isinstance(part.get("n"), int) and part["n"] else ""
    return _text((glyph, style), f" {label} ", (duration(s), "bold"), f"{share}{count}{how}")
