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


def test_tokens_per_s_tile_names_its_window_live_and_after_the_run() -> None:
    live = {**BASE, "rate_window": {"kind": "trailing", "span_s": 30.0, "seconds": 30.1, "steps": 1030}}
    rows = _tile_rows(_screen(live))
    assert "35.1k" in rows and f"last 30 s, {ms(0.0292)}" in rows, rows
    # shorter than the span (a young run): the seconds it actually spans
    young = {**BASE, "rate_window": {"kind": "trailing", "span_s": 30.0, "seconds": 4.24, "steps": 145}}
    assert f"last 4.2 s, {ms(0.0292)}" in _tile_rows(_screen(young, width=200))
    # 100 columns, eight tiles: the step time is cut before the window is
    assert "last 30 s" in _tile_rows(_screen(live, width=100))
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
