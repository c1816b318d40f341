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
