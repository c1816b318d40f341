"""No secret on the command line reaches any output (issue 22, item 5).

Before, 29 of 76 spellings survived into meta, events, summary, passport, report, the
dashboard's state and `tm attach`. They are hidden once, when the command line is first
recorded, so every output inherits it; the test runs every spelling through every output.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from trainmeter.redact import REDACTED, redact_argv

from ..conftest import run_dirs, run_tm, tm_env
from .secrets_catalogue import READABLE, catalogue

CATALOGUE = catalogue()


def test_the_catalogue_is_the_size_the_issues_tried() -> None:
    # 96 from issues 9 and 22, 11 spellings listed in issue 29, 31 from its second pass
    assert len(CATALOGUE) >= 96 + 11 + 31


@pytest.mark.parametrize(("argv", "secret"), CATALOGUE, ids=[" ".join(a)[:40] for a, _ in CATALOGUE])
def test_each_spelling_is_hidden(argv: list[str], secret: str) -> None:
    shown = redact_argv(["python", "t.py", *argv])
    assert secret not in " ".join(shown), shown
    assert REDACTED in " ".join(shown)


def test_readable_arguments_stay_readable() -> None:
    assert redact_argv(READABLE) == READABLE
    assert redact_argv(["--token", "--lr", "3"]) == ["--token", "--lr", "3"]


def _all_args() -> list[str]:
    args: list[str] = []
    for argv, _ in CATALOGUE:
        args += argv
    return args + READABLE


def _leaks(text: str) -> list[str]:
    return [secret for _, secret in CATALOGUE if secret in text]


def test_no_spelling_reaches_any_output(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text("import sys\nprint('args', len(sys.argv))\n")
    run = run_tm(["--no-web", "t.py", *_all_args()], tmp_path)
    assert run.returncode == 0, run.stderr
    assert _leaks(run.stderr) == []
    [run_dir] = run_dirs(tmp_path)
    for path in sorted(run_dir.iterdir()):
        if path.is_file():
            assert _leaks(path.read_text(errors="replace")) == [], path.name
    outputs = {
        "summary": ["summary"],
        "summary --json": ["summary", "--json"],
        "passport": ["passport"],
        "report": ["report", "-o", str(tmp_path / "r.html")],
        "export csv": ["export", "csv", "-o", str(tmp_path / "x.csv")],
        "runs": ["runs"],
    }
    for name, args in outputs.items():
        out = run_tm(args, tmp_path)
        assert out.returncode == 0, (name, out.stderr[-1000:])
        assert _leaks(out.stdout + out.stderr) == [], name
    for written in ("r.html", "x.csv"):
        path = tmp_path / written
        if path.exists():
            assert _leaks(path.read_text(errors="replace")) == [], written


def test_attach_shows_and_records_no_spelling(tmp_path: Path) -> None:
    target = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", *_all_args()],
        stdout=subprocess.DEVNULL,
    )
    try:
        # attach reads the command line once: wait until the target shows its own (with the
        # secrets), not the copy of pytest's a process has between its fork and its exec
        import psutil

        deadline = time.monotonic() + 60
        while psutil.Process(target.pid).cmdline()[-len(_all_args()):] != _all_args():
            assert time.monotonic() < deadline, "the target never showed its arguments"
            time.sleep(0.02)
        out = run_tm(
            ["attach", str(target.pid), "--interval", "0.2", "--duration", "1", "--no-web"],
            tmp_path,
            env=tm_env(),
        )
    finally:
        target.kill()
        target.wait()
    assert _leaks(out.stdout + out.stderr) == []
    for run_dir in run_dirs(tmp_path):
        for path in run_dir.iterdir():
            if path.is_file():
                assert _leaks(path.read_text(errors="replace")) == [], path.name
