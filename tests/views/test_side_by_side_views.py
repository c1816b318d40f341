"""The text views' fixes docs/side-by-side.md asked for, on a real CPU-only snapshot of
examples/tiny_gpt.py (no convention chosen, no GPU, no checkpoint and no eval)."""

from __future__ import annotations

import json

from trainmeter.views.passport import build_passport
from trainmeter.views.passport_md import render_markdown
from trainmeter.views.report import render_report
from trainmeter.views.terminal_summary import summary_text

from ..conftest import REPO

SNAP = REPO / "tests" / "fixtures" / "web" / "snapshot_cpu_no_convention.json"


def snap() -> dict:
    return json.loads(SNAP.read_text())


def test_summary_says_checkpoints_and_eval_were_not_measured_and_why():
    text = summary_text(snap(), width=160)
    assert "Checkpoints: not measured (nothing was saved with torch.save" in text
    assert "Eval: not measured (the model never went to eval() and back to train())" in text
    assert "Checkpoints 0.00 ms" not in text and "Eval 0.00 ms" not in text


def test_passport_and_report_say_checkpoints_and_eval_were_not_measured():
    passport = build_passport(snap())
    parts = {p["name"]: p for p in passport["time_split"]}
    assert parts["eval"]["not_measured"] == "the model never went to eval() and back to train()"
    assert "not_measured" not in parts["compute"]
    md = render_markdown(passport)
    assert "| Eval | not measured: the model never went to eval() and back to train() | |" in md
    assert "| Checkpoints | 0.00 ms" not in md
    html = render_report(passport, [])
    assert "not measured: the model never went to eval() and back to train()" in html


def test_passport_and_report_list_each_missing_reason_once_with_its_numbers():
    passport = build_passport(snap())
    absent = passport["absent"]
    reasons = list(absent.values())
    repeated = max(set(reasons), key=reasons.count)
    names = [k for k, v in absent.items() if v == repeated]
    assert len(names) >= 2  # this run has a reason shared by several numbers
    md = render_markdown(passport).split("### Not computed", 1)[1].split("<details>", 1)[0]
    lines = [line for line in md.splitlines() if line.startswith("- ")]
    assert len(lines) == len(set(reasons)) < len(absent)
    assert f"- {', '.join(f'**{n}**' for n in names)}: {repeated}" in lines
    html = render_report(passport, []).split("<h2>Not computed</h2>", 1)[1].split("</ul>", 1)[0]
    assert html.count("<li>") == len(set(reasons))
    assert html.count(">" + repeated.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") + "<") <= 1
