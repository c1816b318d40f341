"""`tm check`: thresholds on a finished run, against a baseline, absent numbers failing.

Runs are written as `events.jsonl` from hand-built records (one H100 SXM, hf convention at
5,831,346,816 FLOP/token), so every number is known:
  fast: 10,000 tokens a step, a step every 1.00 s -> 10,000 tokens/s, step time 1.00 s,
        MFU = 5.831346816e13 / 989.5e12 = 5.89%
  slow: 10,000 tokens a step, a step every 1.25 s ->  8,000 tokens/s, step time 1.25 s,
        MFU = 4.71%; against fast: tokens/s drop 1 - 8000/10000 = 20.0%, step time rise 25.0%,
        MFU drop 20.0%
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.engine.build import device, end, hello, phase, start, steps
from tests.engine.test_budget import SHAPE
from trainmeter.cli import check
from trainmeter.cli.main import main as tm


def write_run(root: Path, name: str, dt: float, data_s: float | None = None) -> Path:
    run_dir = root / name
    run_dir.mkdir()
    recs = [
        start(0.0, **SHAPE, convention="hf"),
        hello(0.1, probes=("steps", "dataloader")),
        device(0.2),
        steps(1.0, dt, 8, 10_000),
    ]
    if data_s is not None:
        recs.append(phase(1.0 + 7 * dt, "data", data_s))
    recs.append(end(2.0 + 8 * dt))
    lines = []
    for r in recs:
        for one in r if isinstance(r, list) else [r]:
            lines.append(json.dumps(one))
    (run_dir / "events.jsonl").write_text("\n".join(lines) + "\n")
    return run_dir


@pytest.fixture
def runs(tmp_path):
    return (write_run(tmp_path, "fast", 1.0), write_run(tmp_path, "slow", 1.25), tmp_path)


def test_slower_run_against_a_faster_baseline_fails_and_names_the_drop(runs, capsys):
    fast, slow, _ = runs
    rc = tm(["check", str(slow), "--baseline", str(fast), "--max-drop", "5%"])
    out = capsys.readouterr().out
    assert rc == 1
    line = next(x for x in out.splitlines() if "tokens/s" in x)
    assert line.startswith("FAIL")
    assert "8.0k vs baseline 10.0k" in line and "regressed by 20.0%" in line and "5.0% allowed" in line
    assert "(noise ±0.0%)" in line  # every step took the same time: no noise at all
    step_line = next(x for x in out.splitlines() if "step time" in x)
    assert step_line.startswith("FAIL") and "regressed by 25.0%" in step_line
    mfu_line = next(x for x in out.splitlines() if x.split()[1] == "MFU")
    assert mfu_line.startswith("FAIL") and "regressed by 20.0%" in mfu_line and "(hf)" in mfu_line


def test_a_run_against_itself_holds(runs, capsys):
    fast, _, _ = runs
    rc = tm(["check", str(fast), "--baseline", str(fast), "--max-drop", "5%",
             "--min-mfu", "5%", "--min-tokens-per-s", "9k", "--max-step-time", "1.1"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert out.count("ok  ") == 6  # 3 thresholds + tokens/s, step time, MFU vs baseline
    assert "MFU 5.9% (hf) >= 5.0%" in out


def test_absent_number_fails_with_its_reason(tmp_path, runs, capsys):
    fast, _, _ = runs
    # The engine counts the data wait as measured only when the DataLoader probe attached AND a
    # DataLoader was iterated (a data phase record came): a probe with no data phase is a loop
    # that reads its batches another way, whose wait is inside compute (absent, not 0 s). So a
    # measured 0 s is a data phase of 0 s: 0 / (0 + 7) = 0.0% holds.
    zero = write_run(tmp_path, "zero", 1.0, data_s=0.0)
    rc = tm(["check", str(zero), "--max-data-wait", "10%"])
    assert rc == 0
    assert "data wait 0.0% <= 10.0%" in capsys.readouterr().out
    # the probe attached but no DataLoader was iterated: not measured, fails with the reason
    rc = tm(["check", str(fast), "--max-data-wait", "10%", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 1 and doc["ok"] is False
    (result,) = doc["checks"]
    assert result["held"] is False and result["value"] is None
    assert "no DataLoader was iterated" in result["text"] and "not measured" in result["text"]
    # a run without the dataloader probe has no measured data wait and must fail, saying so
    lines = (zero / "events.jsonl").read_text().splitlines()
    no_probe = [x.replace('"dataloader"', '"other"') for x in lines]
    (zero / "events.jsonl").write_text("\n".join(no_probe) + "\n")
    rc = tm(["check", str(zero), "--max-data-wait", "10%", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 1 and doc["ok"] is False
    (result,) = doc["checks"]
    assert result["held"] is False and result["value"] is None
    assert "probe did not attach" in result["text"] and "not measured" in result["text"]


def test_mfu_absent_on_a_cpu_run_fails_with_the_reason():
    snap = {"absent": {"mfu": "no dense peak to divide by: no GPU"}}
    (result,) = check.checks(snap, {"--min-mfu": 0.35}, None)
    assert not result["held"]
    assert result["text"] == "MFU absent (no dense peak to divide by: no GPU); needed >= 35.0%"


def test_data_wait_share_by_hand(tmp_path, capsys):
    # 8 steps 1 s apart: window 7 s; data 1.4 s inside it -> compute 5.6 s;
    # share = 1.4 / (5.6 + 1.4) = 20.0% > 10%
    run_dir = write_run(tmp_path, "waits", 1.0, data_s=1.4)
    rc = tm(["check", str(run_dir), "--max-data-wait", "10%"])
    out = capsys.readouterr().out
    assert rc == 1 and "data wait 20.0% > 10.0%" in out


@pytest.mark.parametrize(
    "argv",
    [
        ["--min-mfu", "abc"],
        ["--baseline", "x"],
        ["--max-drop", "5%"],
        ["--bogus", "1"],
        [],
    ],
)
def test_bad_usage_exits_2(runs, argv, capsys):
    fast, _, _ = runs
    assert tm(["check", str(fast), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tm check: ") and err.count("\n") == 1


def test_real_process_exit_status(runs):
    fast, slow, _ = runs
    cmd = [sys.executable, "-m", "trainmeter", "check", str(slow), "--min-tokens-per-s", "9k"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert "FAIL  tokens/s 8.0k < 9.0k" in proc.stdout


def test_latest_and_names_resolve_under_the_runs_folder(tmp_path, monkeypatch, capsys):
    root = tmp_path / ".trainmeter" / "runs"
    root.mkdir(parents=True)
    write_run(root, "20260101-000000-fast", 1.0)
    write_run(root, "20260101-000100-slow", 1.25)
    monkeypatch.chdir(tmp_path)
    # latest is the slow one: 8k tokens/s against fast's 10k
    rc = tm(["check", "latest", "--baseline", "fast", "--max-drop", "5%"])
    assert rc == 1 and "regressed by 20.0%" in capsys.readouterr().out
    assert tm(["check", "nosuchrun", "--min-mfu", "1%"]) == 2
    assert "no run matches" in capsys.readouterr().err
