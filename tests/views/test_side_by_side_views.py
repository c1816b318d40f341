"""The text views' fixes docs/side-by-side.md asked for, on a real CPU-only snapshot of
examples/tiny_gpt.py (no convention chosen, no GPU, no checkpoint and no eval)."""

from __future__ import annotations

import json
import re

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
    from trainmeter.views.absent_text import grouped

    passport = build_passport(snap())
    absent = passport["absent"]
    reasons = list(absent.values())
    repeated = max(set(reasons), key=reasons.count)
    names = [k for k, v in absent.items() if v == repeated]
    assert len(names) >= 2  # this run has a reason shared by several numbers
    md = render_markdown(passport)
    assert "not computed (see below)" not in md  # said once, under Not computed, not per row
    md = md.split("### Not computed", 1)[1].split("<details>", 1)[0]
    lines = [line for line in md.splitlines() if line.startswith("- ")]
    # one line a cause: the same words with a different lead are one cause (the ladder's
    # "no GPU counters: NVML library not found ..." and OFU's "NVML library not found ...")
    groups = grouped(absent)
    assert len(lines) == len(groups) < len(set(reasons)) < len(absent)
    assert any(set(names) <= set(group) for _, group in groups)
    ladder = next(group for _, group in groups if "ladder" in group)
    assert "ofu" in ladder and "energy_j" in ladder  # one cause: no NVML
    assert "flops_spent" not in absent  # the engine's name for training_flops, said once
    assert not re.search(r"\d\.0[,\]]", md)  # no raw floats ([600576.0, 748032.0])
    html = render_report(passport, []).split("<h2>Not computed</h2>", 1)[1].split("</ul>", 1)[0]
    assert html.count("<li>") == len(groups)


def test_passport_carries_the_model_shape_and_flops_per_token_under_each_convention():
    passport = build_passport(snap())
    model = passport["model"]
    shape = {row["symbol"]: row["value"] for row in model["shape"]}
    assert shape == {"L": 2, "d": 64, "T": 64, "N": 108_288, "E": 4_096}  # examples/tiny_gpt.py
    conv = model["conventions"]
    assert list(conv) == ["hf", "megatron", "titan", "all_params"]  # lowest first
    # hf = 6 (N - E_hf), E_hf the 8,192 lookup parameters: 6 x (108,288 - 8,192) = 600,576
    assert conv["hf"]["flops_per_token"] == 6 * (108_288 - 8_192) == 600_576
    assert model["chosen"] is None
    md = render_markdown(passport)
    assert "| N | parameters | 108,288 | detected |" in md
    assert "| hf | 601 kFLOP | `6(N-E_hf)` |" in md
    assert "MFU is given as the range over these" in md


def test_passport_marks_the_chosen_convention():
    s = snap()
    s["flops_per_token"] = {"value": 663552.0, "convention": "megatron", "source": "detected"}
    model = build_passport(s)["model"]
    assert model["chosen"] == "megatron"
    md = render_markdown(build_passport(s))
    assert "| megatron (chosen) | 664 kFLOP |" in md and "range over these" not in md
