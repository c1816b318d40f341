"""`tm summary`: the real engine, end to end, from a real run's log."""

from __future__ import annotations

import json
from pathlib import Path

from ..conftest import run_dirs, run_tm
from ..supervisor.procs import SENDER, write_script


def _one_run(tmp_path: Path) -> Path:
    write_script(tmp_path / "train.py", SENDER)
    result = run_tm(
        ["-q", "--no-agent", "--budget-tokens", "40k", "--convention", "hf", "--params", "1M",
         "--embedding-params", "0", "--layers", "2", "--d-model", "64", "--seq-len", "128",
         "train.py"],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    return run_dirs(tmp_path)[-1]


def test_summary_json_replays_to_exactly_summary_json(tmp_path: Path) -> None:
    run = _one_run(tmp_path)
    result = run_tm(["summary", "--json"], tmp_path)
    assert result.returncode == 0, result.stderr
    replayed = json.loads(result.stdout)
    assert replayed == json.loads((run / "summary.json").read_text())
    # and it is a real snapshot of this run: 20 steps of 1024 tokens
    assert replayed["steps"] == 20 and replayed["tokens_seen"] == 20 * 1024
    assert result.stderr == ""  # nothing skipped, run.end present


def test_summary_text_names_steps_tokens_series_and_absent_reasons(tmp_path: Path) -> None:
    run = _one_run(tmp_path)
    result = run_tm(["summary", run.name.split("-", 2)[2]], tmp_path)  # by name
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert f"run {run}" in out.splitlines()[1:4]
    assert "so far     20 steps  20.5k tokens" in out  # 20 x 1024 = 20480
    assert "51.2%" in out  # 20480 / 40000 of the token budget
    assert "train_loss  1 " in out  # last emitted value 3.0 - 0.1 * 20 = 1.0
    assert "Absent (" in out and "mfu" in out.lower()
    assert "\x1b" not in out  # a pipe gets plain text


def test_summary_of_a_crashed_run_reports_what_it_skipped(tmp_path: Path) -> None:
    run = _one_run(tmp_path)
    events = run / "events.jsonl"
    lines = events.read_text().splitlines()
    events.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:25])  # run.end cut in half
    result = run_tm(["summary", str(run), "--json"], tmp_path)
    assert result.returncode == 0
    assert json.loads(result.stdout)["steps"] == 20
    notes = result.stderr.splitlines()
    assert notes[0].startswith(f"tm summary: 1 of {len(lines)} lines skipped (1 not JSON)")
    assert "no run.end" in notes[1]


def test_summary_without_runs_or_with_a_bad_option(tmp_path: Path) -> None:
    none = run_tm(["summary"], tmp_path)
    assert none.returncode == 1 and none.stderr.startswith("tm summary: no runs under ")
    bad = run_tm(["summary", "--frob"], tmp_path)
    assert bad.returncode == 2 and "unknown option '--frob'" in bad.stderr


def test_summary_of_a_log_with_a_nested_line_and_a_cut_line(tmp_path: Path) -> None:
    """Issue 9: a log holding `[` * 5000 made `tm summary` crash with RecursionError."""
    from trainmeter import records

    run = tmp_path / ".trainmeter" / "runs" / "20260101-000000-x"
    run.mkdir(parents=True)
    start = records.encode(records.make("run.start", {"argv": ["x"], "name": "x"}, t=0.0, src="tm"))
    (run / "events.jsonl").write_text(start + "\n" + "[" * 5000 + "\n" + start[:20])
    result = run_tm(["summary", "--json"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert "2 of 3 lines skipped (1 nested too deep, 1 not JSON)" in result.stderr
    assert json.loads(result.stdout)["log"] == {
        "lines": 3, "records": 1, "skipped": 2, "reasons": {"nested too deep": 1, "not JSON": 1},
    }
    assert run_tm(["summary"], tmp_path).returncode == 0  # the text summary too
