"""`tm top`'s screen: a run on one full terminal, for a second SSH session beside the training.

`TopScreen` holds what the screen needs besides the snapshot: the bounded history of the loss
and of tokens/s (the dashboard's `views.history`, so memory stays flat however long the run),
fed from the same records and snapshots of the same engine. `render(snap)` returns one rich
renderable: tiles, the sparklines, the utilization ladder, where the time went, ranks, alerts.
"""

from __future__ import annotations

from typing import Any

from ..snapread import get, get_dict, get_number
from .format import duration, ms, percent, si, si_unit
from .memory_text import now_figure
from .summary_blocks import LADDER_COLUMNS, PART_STYLE, _text, bar, time_bar
from .terminal import alerts, loss_text, number, rate_window_label, run_elapsed, train_loss

SHORT_LADDER = ("util", "SM", "tensor", "OFU", "MFU")  # GPU-Util, SM/tensor active, OFU, MFU
SPARKS = "▁▂▃▄▅▆▇█"
CAPACITY = 512  # buckets a series keeps: more than a terminal has columns


def sparkline(values: list[float], width: int) -> str:
    """`values` resampled to `width` cells (mean per cell), each cell one of eight heights."""
    if not values or width <= 0:
        return ""
    if len(values) > width:
        cells = []
        for i in range(width):
            chunk = values[i * len(values) // width : (i + 1) * len(values) // width] or [values[-1]]
            cells.append(sum(chunk) / len(chunk))
    else:
        cells = list(values)
    lo, hi = min(cells), max(cells)
    if hi - lo <= 1e-6 * max(abs(hi), abs(lo)):  # flat, give or take rounding
        return SPARKS[3] * len(cells)
    return "".join(SPARKS[min(int((v - lo) / (hi - lo) * 8), 7)] for v in cells)


def _window_sub(snap: dict[str, Any], step_time: float | None) -> str:
    """Under tokens/s: the window the rate is over first ('last 30 s', 'steady'), then the
    step time over the same window; the window stays when the tile is too narrow for both."""
    bits = [rate_window_label(snap), ms(step_time) if step_time is not None else None]
    return ", ".join(b for b in bits if b)


def _memory_tile(snap: dict[str, Any]) -> tuple[str, str | None, str, str]:
    """Memory now: reserved against the card on the fullest rank ('61.2/80.0 GiB' over
    'reserved, 77%'), or the process's resident memory on CPU ('304 MiB' over 'RSS')."""
    figure = now_figure(snap)
    if figure is None:
        return ("memory", None, "", "memory")
    label, value, where = figure
    first = "reserved" if label == "mem" else "RSS"
    return ("memory", value, ", ".join(b for b in (first, where) if b), "memory")


#: Which tiles stay when the terminal is too narrow for all of them: the first ones.
TILE_PRIORITY = ("progress", "tokens/s", "MFU", "loss", "memory", "OFU", "goodput", "energy")
_GAP = 2  # columns between two tiles


def _tile_width(title: str, value: str | None, sub: str) -> int:
    """The columns a tile needs whole: its title, its number, and what is under a number (an
    absent one's reason may be cut: it is words, said in full by tm summary)."""
    from rich.cells import cell_len

    if value is None:
        return max(cell_len(title), len("absent"))
    return max(cell_len(title), cell_len(value), cell_len(sub))


def fit_tiles(
    tiles: list[tuple[str, str | None, str, str]], short: dict[str, str], room: int
) -> tuple[list[tuple[str, str | None, str, str]], dict[str, str]]:
    """The tiles that fit in `room` columns, each whole: first the shorter words under a tile
    (`short`, by title), then the tiles of least priority (`TILE_PRIORITY`) left out, so the
    screen gets narrower by dropping tiles (an absent number's first), never by cutting a
    number. Returns the tiles kept, in their order, and the short subs used."""

    def need(shown: list[tuple[str, str | None, str, str]], subs: dict[str, str]) -> int:
        widths = [_tile_width(t, v, subs.get(t, sub)) for t, v, sub, _ in shown]
        return sum(widths) + _GAP * (len(shown) - 1)

    shown, used = list(tiles), {}
    if need(shown, used) > room:
        used = {t: sub for t, sub in short.items() if sub}
    rank = {title: i for i, title in enumerate(TILE_PRIORITY)}
    while len(shown) > 1 and need(shown, used) > room:  # an absent one first: it says least
        shown.remove(max(shown, key=lambda tile: (tile[1] is None, rank.get(tile[0], len(rank)))))
    return shown, used


class TopScreen:
    """The bounded history fed from records and snapshots, and the screen drawn from a snapshot.

    The history is `views.history.History` (the dashboard's own): the loop's series from the
    engine's points, tokens/s and the other engine numbers from each snapshot it is given.
    """

    def __init__(self, capacity: int = CAPACITY) -> None:
        from .history import History

        self.history = History(capacity=capacity)

    def on_points(self, points: list[tuple[Any, ...]], origin: float | None) -> None:
        self.history.on_points(points, origin)

    def on_snapshot(self, snap: dict[str, Any], now: float | None = None) -> None:
        self.history.on_snapshot(snap, now)

    def _loss_series(self) -> Any:
        """The training loss as the loop logged it: its explicit key, else a bare `loss`."""
        from ..engine.series_names import BARE_LOSS, canonical

        series = self.history.series
        keys = [k for k in series if canonical(k) == "train_loss"] or (
            [BARE_LOSS] if BARE_LOSS in series else []
        )
        return series[keys[0]] if keys else None

    # ---- drawing -----------------------------------------------------------------------------

    def render(self, snap: dict[str, Any], *, source: str, state: str, width: int, height: int):
        from rich.console import Group

        parts: list[Any] = [self._title(snap, source, state, width), self._tiles(snap, width)]
        parts.append(self._sparks(snap, width))
        middle = self._middle(snap, width)
        if middle is not None:
            parts.append(middle)
        lower = self._lower(snap, width)
        if lower is not None:
            parts.append(lower)
        return Group(*parts)

    def _title(self, snap: dict[str, Any], source: str, state: str, width: int):
        from rich.table import Table

        run = get_dict(snap, "run") or {}
        grid = Table.grid(expand=True, padding=(0, 1))
        grid.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
        grid.add_column(justify="right", no_wrap=True)
        elapsed = run_elapsed(snap)
        style = "green" if state.startswith("finished") else "yellow" if state == "running" else "red"
        grid.add_row(
            _text(("trainmeter top ", "bold magenta"), (str(run.get("name") or "run"), "bold"),
                  "  ", (state, style), f"  {duration(elapsed)}" if elapsed is not None else "",
                  ("  " + source, "dim")),
            _text(("q quits", "dim")),
        )
        return grid

    def _tiles(self, snap: dict[str, Any], width: int):
        """The headline numbers side by side: a title, the value, and what it is against."""
        from rich.panel import Panel
        from rich.table import Table

        absent = get_dict(snap, "absent") or {}
        progress = number(snap.get("progress"))
        eta = number(snap.get("eta_s"))
        mfu = get_dict(snap, "mfu") or {}
        mfu_value, rng = number(mfu.get("value")), mfu.get("range")
        if mfu_value is not None:
            mfu_shown, mfu_sub = percent(mfu_value), str(mfu.get("convention"))
            if any(a.get("kind") == "mfu_impossible" for a in alerts(snap)):
                mfu_sub = f"{mfu_sub}: impossible"
        elif isinstance(rng, list) and len(rng) == 2:
            mfu_shown, mfu_sub = f"{percent(rng[0])[:-1]}-{percent(rng[1])}", "by convention"
        else:
            mfu_shown, mfu_sub = None, ""
        ofu = number(get(snap, "ofu.value"))
        energy = get_dict(snap, "energy") or {}
        goodput = get_number(snap, "time.goodput")
        loss = train_loss(snap)
        steps = number(snap.get("steps"))
        tps = number(snap.get("tokens_per_s"))
        step_time = number(snap.get("step_time_s"))
        joules, jpt = number(energy.get("joules")), number(energy.get("joules_per_token"))
        tiles = [
            ("progress", percent(progress) if progress is not None else None,
             f"ETA {duration(eta)}" if eta is not None else f"{si(steps)} steps", "progress"),
            ("tokens/s", si(tps) if tps is not None else None,
             _window_sub(snap, step_time), "tokens_per_s"),
            ("MFU", mfu_shown, mfu_sub, "mfu"),
            ("OFU", percent(ofu) if ofu is not None else None, "counters" if ofu is not None else "", "ofu"),
            ("loss", loss_text(loss) if loss is not None else None, "train", ""),
            ("goodput", percent(goodput) if goodput is not None else None, "of wall time", "goodput"),
            ("energy", si_unit(joules, "J") if joules is not None else None,
             f"{si_unit(jpt, 'J')}/tok" if jpt is not None else "", "energy"),
            _memory_tile(snap),
        ]
        short = {"tokens/s": rate_window_label(snap) or ""}  # the window stays, the step time goes
        tiles, subs_short = fit_tiles(tiles, short, width - 4)
        table = Table(box=None, expand=False, show_header=True, header_style="dim",
                      padding=(0, 1), show_edge=False, pad_edge=False)
        # each column as wide as its number and the words under it, the room left shared out:
        # nothing is cut but an absent number's reason (words, whole in tm summary)
        need = [_tile_width(t, v, subs_short.get(t, sub)) for t, v, sub, _ in tiles]
        spare = max(width - 4 - sum(need) - _GAP * (len(tiles) - 1), 0)
        for i, (title, *_) in enumerate(tiles):
            share = spare // len(tiles) + (1 if i < spare % len(tiles) else 0)
            table.add_column(title, no_wrap=True, overflow="ellipsis", width=need[i] + share)
        values, subs = [], []
        for title, value, sub, key in tiles:
            if value is None:
                values.append(_text(("absent", "dim")))
                subs.append(_text((str(absent.get(key) or ""), "dim")))
            else:
                values.append(_text((value, "bold")))
                subs.append(_text((subs_short.get(title, sub), "dim")))
        table.add_row(*values)
        table.add_row(*subs)
        return Panel(table, border_style="blue", padding=(0, 1))

    def _sparks(self, snap: dict[str, Any], width: int):
        from rich.panel import Panel
        from rich.table import Table

        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True, style="bold")
        grid.add_column(no_wrap=True)
        grid.add_column(no_wrap=True, style="dim")
        spark_width = max(width - 36, 10)
        for label, series, fmt, style in (
            ("loss", self._loss_series(), loss_text, "yellow"),
            ("tokens/s", self.history.series.get("tokens_per_s"), si, "green"),
        ):
            if series is not None and len(series):
                values = list(series.last)  # the range below is over every point, spikes too
                lo, hi = min(series.lo), max(series.hi)
                grid.add_row(label, _text((sparkline(values, spark_width), style)),
                             f"{fmt(values[-1])} ({fmt(lo)}..{fmt(hi)})")
            else:
                grid.add_row(label, _text(("no points yet", "dim")), "")
        return Panel(grid, title="history", title_align="left", border_style="blue")

    def _middle(self, snap: dict[str, Any], width: int):
        from rich.panel import Panel
        from rich.table import Table

        ladder = get_dict(snap, "ladder")
        if ladder:
            table = Table(box=None, padding=(0, 1), show_edge=False, header_style="bold")
            table.add_column("GPU", no_wrap=True)
            for label in SHORT_LADDER:
                table.add_column(label, justify="right", no_wrap=True)
            per_gpu = get_dict(ladder, "gpus") or {}
            for gpu, values in [*per_gpu.items(), ("mean", ladder.get("mean") or {})]:
                cells = []
                for key, _ in LADDER_COLUMNS:
                    v = number((values or {}).get(key))
                    cells.append(percent(v) if v is not None else "-")
                table.add_row(str(gpu), *cells)
            left: Any = Panel(table, title="utilization ladder", title_align="left", border_style="blue")
        else:
            why = get(snap, "absent.ladder") or "no GPU counters"
            left = Panel(_text((str(why), "dim")), title="utilization ladder", title_align="left",
                         border_style="blue")
        split = get_dict(snap, "time") or {}
        parts = [p for p in split.get("parts") or [] if isinstance(p, dict)]
        rows: list[Any] = []
        bar_width = max((width * 2 // 5 if width < 110 else width // 2) - 6, 10)
        if parts:
            rows.append(time_bar(parts, bar_width))
            total = sum(number(p.get("s")) or 0.0 for p in parts)
            legend = []
            for p in parts:
                s = number(p.get("s"))
                if s is None or s <= 0:
                    continue
                glyph, style = PART_STYLE.get(str(p.get("name")), ("▪", "white"))
                line = _text((glyph, style), " ", (f"{duration(s):>6}", "bold"),
                             f" {percent(s / total):>6}" if total else "",
                             f"  {p.get('label') or p.get('name')}")
                line.no_wrap, line.overflow = True, "ellipsis"
                legend.append(line)
            rows.extend(legend)
        else:
            rows.append(_text(("nothing measured yet", "dim")))
        from rich.console import Group

        right = Panel(Group(*rows), title="where the time went", title_align="left", border_style="blue")
        grid = Table.grid(expand=True)
        grid.add_column(ratio=3 if width < 110 else 1)
        grid.add_column(ratio=2 if width < 110 else 1)
        grid.add_row(left, right)
        return grid

    def _lower(self, snap: dict[str, Any], width: int):
        from rich.console import Group
        from rich.panel import Panel
        from rich.table import Table

        ranks = get_dict(snap, "ranks")
        rank_rows: list[Any] = []
        split = get_dict(snap, "comm.ranks")
        if split:  # each rank's step: computing | waiting for the others; ! the one they wait for
            named = get_dict(snap, "straggler") or {}
            slow = {str(r) for r in named.get("ranks") or []}
            longest = max((number(r.get("step_s")) or 0.0) for r in split.values()
                          if isinstance(r, dict)) or 1.0
            rank_rows.append(_text(("compute | waiting, a step", "dim")))
            for rank, row in split.items():
                if not isinstance(row, dict):
                    continue
                compute, wait = number(row.get("compute_s")), number(row.get("wait_s"))
                rank_rows.append(_text(
                    f"rank {rank} ", bar((compute or 0.0) / longest, 6, "cyan"),
                    f" {ms(compute)} | {ms(wait)}", (" !" if str(rank) in slow else "", "bold red")))
        elif ranks and get_dict(ranks, "step_time_s") is not None:
            times = ranks["step_time_s"]
            slowest = max((number(v) or 0.0) for v in times.values()) or 1.0
            for rank, s in times.items():
                mark = " slowest" if str(rank) == str(ranks.get("slowest")) else ""
                rank_rows.append(_text(f"rank {rank} ", bar((number(s) or 0) / slowest, 12, "cyan"),
                                       f" {ms(s)}", (mark, "bold red")))
            if number(ranks.get("spread")) is not None:
                rank_rows.append(_text(("spread ", "dim"), (percent(ranks["spread"]), "bold")))
        else:
            st = number(snap.get("step_time_s"))
            rank_rows.append(_text(("one rank" + (f": {ms(st)}/step" if st is not None else ""), "dim")))
        alert_rows = [_text(("! ", "bold red"), (str(a.get("kind")), "bold red"), " ", str(a.get("message") or ""))
                      for a in alerts(snap)] or [_text(("none", "dim"))]
        grid = Table.grid(expand=True)
        grid.add_column(ratio=1)
        grid.add_column(ratio=2)
        grid.add_row(
            Panel(Group(*rank_rows), title="ranks", title_align="left", border_style="blue"),
            Panel(Group(*alert_rows), title=f"alerts ({len(alerts(snap))})", title_align="left",
                  border_style="red" if alerts(snap) else "blue"),
        )
        return grid
