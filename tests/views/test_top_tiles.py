"""`tm top`'s tiles, rendered as text from hand-written snapshots: the tokens/s tile says which
window its rate is over (docs/rates.md), and a memory tile shows memory now, reserved against
the card with a caching allocator and the resident set on CPU."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from trainmeter.views.format import ms
from trainmeter.views.top import TopScreen

GIB, MIB = 2**30, 2**20


def _screen(snap: dict[str, Any], width: int = 160) -> str:
    console = Console(width=width, record=True, color_system=None, file=open("/dev/null", "w"))  # noqa: SIM115
    renderable = TopScreen().render(snap, source="test", state="running", width=width, height=40)
    console.print(renderable)
    return console.export_text()


def _tile_rows(text: str) -> str:
    """The tiles panel's value and sub rows, spaces squeezed."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if "tokens/s" in line)
    return "\n".join(" ".join(line.split()) for line in lines[start : start + 3])


BASE: dict[str, Any] = {"steps": 120, "tokens_per_s": 35_100.0, "step_time_s": 0.0292}
#: Every tile with a number: a GPU run at half its budget.
FULL: dict[str, Any] = {
    **BASE, "progress": 0.5, "eta_s": 754.0, "mfu": {"value": 0.0000123, "convention": "megatron"},
    "ofu": {"value": 0.332}, "time": {"goodput": 0.521}, "series": {"train_loss": {"value": 0.38774}},
    "energy": {"joules": 1403.0, "joules_per_token": 0.00684},
    "rate_window": {"kind": "steady", "seconds": 61.0, "steps": 2090},
    "memory": {"ranks": {"0": {"device": "cuda", "index": 0, "reserved_b": 61.2 * GIB,
                               "total_b": 80 * GIB, "reserved_share": 61.2 / 80}}},
}


def test_tokens_per_s_tile_names_its_window_live_and_after_the_run() -> None:
    live = {**BASE, "rate_window": {"kind": "trailing", "span_s": 30.0, "seconds": 30.1, "steps": 1030}}
    rows = _tile_rows(_screen(live))
    assert "35.1k" in rows and f"last 30 s, {ms(0.0292)}" in rows, rows
    # shorter than the span (a young run): the seconds it actually spans
    young = {**BASE, "rate_window": {"kind": "trailing", "span_s": 30.0, "seconds": 4.24, "steps": 145}}
    assert f"last 4.2 s, {ms(0.0292)}" in _tile_rows(_screen(young, width=200))
    # too narrow for the step time under the rate: it is left out whole, the window stays
    narrow = _tile_rows(_screen({**FULL, **live}, width=80))
    assert "last 30 s" in narrow and "ms" not in narrow.splitlines()[2], narrow
    ended = {**BASE, "rate_window": {"kind": "steady", "seconds": 61.0, "steps": 2090}}
    assert f"steady, {ms(0.0292)}" in _tile_rows(_screen(ended, width=200))


def test_memory_tile_gpu_fullest_rank_reserved_against_the_card() -> None:
    snap = {**BASE, "memory": {"ranks": {
        "0": {"device": "cuda", "index": 0, "reserved_b": 40 * GIB, "allocated_b": 30 * GIB,
              "total_b": 80 * GIB, "reserved_share": 0.5},
        "1": {"device": "cuda", "index": 1, "reserved_b": 60 * GIB, "allocated_b": 50 * GIB,
              "total_b": 80 * GIB, "reserved_share": 60 / 80},
    }}}
    rows = _tile_rows(_screen(snap, width=200))
    assert "memory" in rows and "60.0/80.0 GiB" in rows, rows
    assert "reserved, rank 1, 75.0%" in rows, rows  # 60 / 80, the fullest rank


def test_memory_tile_cpu_shows_rss_and_absent_says_why() -> None:
    snap = {**BASE, "memory": {"ranks": {"0": {"device": "cpu", "rss_b": 304 * MIB}}}}
    rows = _tile_rows(_screen(snap))
    assert "304 MiB" in rows and "RSS" in rows, rows
    absent = {**BASE, "absent": {"memory": "no memory reading"}}
    rows = _tile_rows(_screen(absent, width=220))
    assert "no memory reading" in rows, rows


def test_top_fits_the_width_by_dropping_tiles_never_by_cutting_a_number() -> None:
    """At 160, 120, 80 and 60 columns each tile shown is whole: its number and the numbers
    under it, never an ellipsis; what does not fit is left out, least wanted first."""
    from trainmeter.views.format import duration, metric, percent, si, si_unit

    texts = {  # what each tile shows whole, when it is shown
        "progress": [percent(0.5), f"ETA {duration(754.0)}"],
        "tokens/s": [si(35_100.0), "steady"],
        "MFU": [percent(0.0000123)],
        "OFU": [percent(0.332)],
        "loss": [metric(0.38774)],
        "goodput": [percent(0.521)],
        "energy": [si_unit(1403.0, "J"), f"{si_unit(0.00684, 'J')}/tok"],
        "memory": ["61.2/80.0 GiB", f"reserved, {percent(61.2 / 80)}"],
    }
    shown = {}
    for width in (160, 120, 80, 60):
        lines = _screen(FULL, width=width).splitlines()
        start = next(i for i, line in enumerate(lines) if "tokens/s" in line)
        panel = lines[start - 1 : start + 4]
        assert all(len(line) <= width for line in panel), (width, panel)
        rows = "\n".join(line.strip("│╭╮╰╯─ ") for line in panel[1:4])
        assert "…" not in rows, (width, rows)
        kept = [title for title in texts if title in rows.splitlines()[0].split()]
        shown[width] = kept
        for title, wanted in texts.items():
            if title in kept:
                assert all(text in rows for text in wanted), (width, title, rows)
            else:
                assert wanted[0] not in rows, (width, title, rows)
    assert len(shown[160]) == 8 and shown[80][:3] == ["progress", "tokens/s", "MFU"]
    assert len(shown[60]) < len(shown[80]) <= len(shown[120]) <= 8
    assert "goodput" not in shown[60] and "energy" not in shown[60]  # least wanted go first
