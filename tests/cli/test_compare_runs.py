"""`tm compare` of two real runs of one small script, the second with a DataLoader whose dataset
sleeps in `__getitem__` (num_workers=0): the data wait is named as the difference. Also `tm runs`
over the same two runs, and the bad inputs of the run commands."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trainmeter.views.format import si

from ..conftest import default_signals, run_dirs, tm_env
from .conftest import SCRIPTS, tm_cli

pytestmark = pytest.mark.slow
STEPS = 16
SLEEP_MS = 10  # x 8 samples a batch: 80 ms of data wait a step


def _args(name: str, sleep_ms: int) -> list[str]:
    return ["-q", "--name", name, str(SCRIPTS / "loader_lm.py"), "--steps", str(STEPS),
            "--sleep-ms", str(sleep_ms)]


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The two runs at once (each is one process on one of the box's two cores; the data wait
    is a sleep, not CPU). The slow one starts once the quick one's run directory exists, so the
    quick one is listed first (directories sort by their start second, then by name)."""
    cwd = tmp_path_factory.mktemp("compare")
    quick = subprocess.Popen([sys.executable, "-m", "trainmeter", *_args("quick-loader", 0)],
                             cwd=cwd, env=tm_env(), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, preexec_fn=default_signals)
    deadline = time.monotonic() + 60
    while not run_dirs(cwd) and quick.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    slow = tm_cli(_args("slow-loader", SLEEP_MS), cwd=cwd)
    _, quick_err = quick.communicate(timeout=240)
    assert quick.returncode == 0, quick_err
    assert slow.returncode == 0, slow.stderr
    return cwd


def test_compare_names_the_data_wait(two_runs: Path) -> None:
    result = tm_cli(["compare", "quick-loader", "slow-loader", "--json"], cwd=two_runs)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["biggest"]["key"] == "data"
    data = {r["key"]: r for r in out["rows"] if r["section"] == "time_per_step"}["data"]
    assert data["b"] >= SLEEP_MS * 8 / 1000 * 0.9  # at least ~80 ms a step, slept for real
    assert data["b"] - data["a"] > 0.05
    text = tm_cli(["compare", "quick-loader", "slow-loader"], cwd=two_runs)
    assert text.returncode == 0
    assert "the biggest difference is data wait: slow-loader spends" in text.stdout
    assert "Time per step (the training loop)" in text.stdout
    # no checkpoint was saved in either run: said so, never "0 ms" (every other screen agrees)
    checkpoints = next(x for x in text.stdout.splitlines() if x.strip().startswith("Checkpoints"))
    assert checkpoints.split()[1:] == ["not", "measured", "not", "measured"]
    assert " 0 ms" not in text.stdout


def test_runs_lists_both(two_runs: Path) -> None:
    result = tm_cli(["runs"], cwd=two_runs)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["RUN", "START", "(UTC)", "DURATION", "STATUS", "STEPS", "TOKENS",
                                "TOKENS/S", "MFU"]
    assert len(lines) == 3
    for line, name in zip(lines[1:], ("quick-loader", "slow-loader"), strict=True):
        # the columns after the duration ("3.2 s" is two words): status, steps, tokens, ..., MFU
        cells = line.split()
        assert cells[0].endswith(name) and cells[-5:-3] == ["ok", str(STEPS)]
        assert cells[-3] == si(STEPS * 8 * 32) == "4.1k"  # 16 steps x 8 x 32 tokens
        assert cells[-1] == "-"  # no GPU: MFU absent, not 0
    listed = json.loads(tm_cli(["runs", "--json"], cwd=two_runs).stdout)
    assert [r["name"] for r in listed] == ["quick-loader", "slow-loader"]
    assert all(r["tokens"] == STEPS * 8 * 32 and r["mfu"] is None for r in listed)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["compare", "quick-loader"], "name two runs to compare"),
        (["compare", "quick-loader", "quick-loader"], "are the same run"),
        (["compare", "nope", "slow-loader"], "no run matches 'nope'"),
        (["passport", "-loader"], "unknown option '-loader'"),
        (["passport", "YEAR"], "fits 2 runs"),  # the year both run directories start with
        (["report", "--bogus"], "unknown option '--bogus'"),
        (["export", "xlsx"], "'xlsx' is not a format"),
        (["export", "wandb"], "wandb needs --project"),
        (["export", "csv", "a", "b"], "too many runs"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    two_runs: Path, args: list[str], words: str, monkeypatch, capsys
) -> None:
    from trainmeter.cli.main import main

    before = run_dirs(two_runs)
    args = [before[0].name[:4] if a == "YEAR" else a for a in args]
    monkeypatch.chdir(two_runs)
    assert main(args) == 2, args
    out, err = capsys.readouterr()
    assert words in err and err.count("\n") == 1, err
    assert out == ""
    assert run_dirs(two_runs) == before  # nothing made, nothing lost


def test_a_mistyped_command_starts_no_run(tmp_path: Path, monkeypatch, capsys) -> None:
    from trainmeter.cli.main import main

    monkeypatch.chdir(tmp_path)
    assert main(["rnus"]) == 2
    err = capsys.readouterr().err
    assert err == "tm: 'rnus' is not a tm command nor a script here (did you mean tm runs?)\n"
    assert not (tmp_path / ".trainmeter").exists()
