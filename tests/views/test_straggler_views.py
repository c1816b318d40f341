"""The straggler and each rank's compute and wait in every text view: the end-of-run line, `tm
summary`, the passport and its Markdown, from one engine snapshot of hand-built records (rank 1
computes 60 ms longer a step than rank 0: tests/engine/test_stragglers.py works the numbers)."""

from __future__ import annotations

import pytest

from trainmeter.views.passport import build_passport
from trainmeter.views.passport_md import render_markdown
from trainmeter.views.report import render_report
from trainmeter.views.straggler_text import end_phrase, sentence, verdict
from trainmeter.views.terminal import summary_line
from trainmeter.views.terminal_summary import summary_text

from ..engine.build import end, run
from ..engine.test_stragglers import job


@pytest.fixture(scope="module")
def snap():
    return run(job({0: [0.08] * 24, 1: [0.02] * 24}, with_steps=True), end(5.0))


def test_the_end_line_names_the_straggler(snap):
    line = summary_line(snap, "runs/a")
    assert "rank 1 computes 60.0 ms longer a step, 60.0% of the time" in line
    assert end_phrase({}) is None


def test_tm_summary_splits_each_rank_and_says_who_the_others_wait_for(snap):
    text = summary_text(snap)
    lines = [" ".join(line.split()) for line in text.splitlines()]
    title = "Ranks (a step: computing, and waiting for the others in collectives)"
    i = lines.index(title)
    assert lines[i + 1] == "step compute waits for the others share"
    assert lines[i + 2] == "rank 0 100 ms 20.0 ms 80.0 ms 80.0%"
    assert lines[i + 3] == "rank 1 100 ms 80.0 ms 20.0 ms 20.0%"
    assert " ".join(lines[i + 4:i + 6]).startswith(  # wrapped at the terminal's width
        "rank 1 computes 60.0 ms longer a step than the others since step 5; the other rank "
        "waits for it: 60.0% of the job's time"
    )
    # the alert and the advice say it too
    assert "rank 1 computes longer per step than the other ranks" in text
    assert "Rank 1 computes 60 ms longer a step" in text


def test_the_passport_keeps_the_split_and_the_straggler(snap):
    passport = build_passport(snap)
    ranks = passport["ranks"]
    assert ranks["per_rank"]["1"]["compute_s"] == pytest.approx(0.08)
    assert ranks["per_rank"]["0"]["wait_share"] == pytest.approx(0.8)
    assert ranks["straggler"]["rank"] == 1 and ranks["timed"] == "host"
    md = render_markdown(passport)
    assert "### Ranks: a step, computing and waiting for the others" in md
    assert "| 1 | 100 ms | 80.0 ms | 20.0 ms | 20.0% |" in md
    assert "- rank 1 computes 60.0 ms longer a step than the others since step 5" in md
    html = render_report(passport, [])
    assert "<h2>Ranks: a step, computing and waiting for the others</h2>" in html
    assert "<td>rank 1 (the others wait for it)</td><td class=n>100 ms</td>" in html
    assert "<p>Rank 1 computes 60.0 ms longer a step than the others since step 5;" in html


def test_an_episode_that_ended_and_no_straggler_said_so():
    ended = {"kind": "node", "node": 1, "ranks": [2, 3], "extra_s": 0.04, "extra_share": 0.25,
             "others": 2, "since_step": 9, "until_step": 40, "active": False}
    assert sentence(ended) == (
        "node 1 (ranks 2, 3) computes 40.0 ms longer a step than the others from step 9 to "
        "step 40; the other 2 ranks wait for it: 25.0% of the job's time"
    )
    assert verdict({"comm": {"rule": "the rule", "episodes": [ended]}}).startswith("node 1")
    assert verdict({"comm": {"rule": "the rule", "episodes": []}}) == (
        "no rank is slower than the others by the rule: the rule"
    )
    assert verdict({"absent": {"straggler": "too few blocks"}}) == (
        "no straggler named: too few blocks"
    )


def test_tm_top_shows_each_ranks_split_and_marks_the_one_waited_for(snap):
    from rich.console import Console

    from trainmeter.views.top import TopScreen

    console = Console(width=120, record=True, color_system=None)
    console.print(TopScreen()._lower(snap, 120))
    # the ranks panel is the left column: its rows, up to the alerts panel's border
    left = [line.split("││")[0].split("│╰")[0].strip("│ ") for line in console.export_text().splitlines()]
    assert "rank 0 █▎░░░░ 20.0 ms | 80.0 ms" in left, left
    assert "rank 1 ████▊░ 80.0 ms | 20.0 ms !" in left, left
