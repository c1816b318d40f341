"""Each reason a run is watched from outside only, produced for real under `tm`.

The four runs are started together; each waits (no CPU) until tm's watcher has written its
`observe_only` fact to the log, then ends, and each test reads its own run directory. (A fixed
sleep raced the watcher on a loaded machine: a run that ended first was judged at its end, with
the end's note instead of the process's command line.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ..conftest import read_events, run_dirs, tm_env
from .conftest import SCRIPTS

pytestmark = pytest.mark.slow

CASES = ("isolated", "other_venv", "shell_root", "no_pythonpath")
STOP = "stop"  # the file each run waits for, in its working directory


def command(case: str, bare_python: str) -> list[str]:
    sleeper = str(SCRIPTS / "sleeper.py")
    return {
        "isolated": [sys.executable, "-I", sleeper, STOP],
        "other_venv": [bare_python, sleeper, STOP],
        "shell_root": ["./job.sh"],
        "no_pythonpath": ["env", "-u", "PYTHONPATH", sys.executable, sleeper, STOP],
    }[case]


def _reported(workdir: Path) -> bool:
    """Whether the run's log holds an `observe_only` fact yet (the live watcher's)."""
    dirs = run_dirs(workdir)
    if not dirs or not (dirs[-1] / "events.jsonl").exists():
        return False
    for line in (dirs[-1] / "events.jsonl").read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:  # the line being written
            continue
        if record.get("kind") == "fact" and record["d"].get("key") == "observe_only":
            return True
    return False


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, bare_venv: Path) -> dict[str, Path]:
    """All four `tm -- ...` runs, in parallel; returns each one's working directory."""
    started: dict[str, tuple[Path, subprocess.Popen]] = {}
    try:
        for case in CASES:
            workdir = tmp_path_factory.mktemp(case)
            if case == "shell_root":
                job = workdir / "job.sh"
                job.write_text(
                    "#!/bin/sh\n"
                    f"i=0; while [ ! -e {STOP} ] && [ $i -lt 1500 ]; do sleep 0.2; i=$((i+1)); done\n"
                    "echo '{\"shell\": true}'\n"
                )
                job.chmod(0o755)
            argv = [sys.executable, "-m", "trainmeter", "--no-web", "--"]
            argv += command(case, str(bare_venv / "bin" / "python"))
            proc = subprocess.Popen(
                argv,
                cwd=workdir,
                env=tm_env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            started[case] = (workdir, proc)
        deadline = time.monotonic() + 240
        waiting = dict(started)
        while waiting:
            for case, (workdir, proc) in list(waiting.items()):
                if _reported(workdir):
                    (workdir / STOP).touch()
                    del waiting[case]
                else:
                    assert proc.poll() is None, f"{case}: tm ended before its watcher spoke"
            assert time.monotonic() < deadline, f"no observe_only fact from {sorted(waiting)}"
            time.sleep(0.1)
    finally:
        for workdir, _ in started.values():
            (workdir / STOP).touch()
    out: dict[str, Path] = {}
    for case, (workdir, proc) in started.items():
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, f"{case}: exit {proc.returncode}\n{stdout}\n{stderr}"
        out[case] = workdir
    return out


def observe_only(workdir: Path) -> tuple[list[dict], dict]:
    """The observe_only facts in the log, and the summary."""
    run_dir = run_dirs(workdir)[-1]
    facts = [
        r["d"]
        for r in read_events(run_dir)
        if r["kind"] == "fact" and r["d"].get("key") == "observe_only"
    ]
    summary = json.loads((run_dir / "summary.json").read_text())
    return facts, summary


def check(workdir: Path, start: str) -> dict:
    facts, summary = observe_only(workdir)
    assert len(facts) == 1, facts
    (fact,) = facts
    assert fact["source"] == "detected"
    assert fact["value"].startswith(start), fact["value"]
    assert summary["facts"]["observe_only"]["value"] == fact["value"]
    assert any(w.startswith(f"observe only ({start}") for w in summary["warnings"])
    return fact


def test_python_started_with_isolated_mode(runs: dict[str, Path]) -> None:
    fact = check(runs["isolated"], "python started with -I")
    assert f"{sys.executable} -I " in fact["note"]


def test_python_of_another_virtualenv(runs: dict[str, Path], bare_venv: Path) -> None:
    python = str(bare_venv / "bin" / "python")
    fact = check(runs["other_venv"], f"trainmeter is not importable from {python}")
    assert fact["note"].split(": ", 1)[1].startswith(python)


def test_shell_script_root(runs: dict[str, Path]) -> None:
    fact = check(runs["shell_root"], "the command is not a Python program (")
    assert "job.sh" in fact["note"]


def test_environment_without_pythonpath(runs: dict[str, Path]) -> None:
    check(runs["no_pythonpath"], "its environment did not inherit tm's PYTHONPATH")


def test_python_with_the_agent_is_not_observe_only(workdir: Path) -> None:
    """The control: the same sleeper under plain `tm` says hello and gets no such fact."""
    done = subprocess.run(
        [sys.executable, "-m", "trainmeter", "--no-web", str(SCRIPTS / "sleeper.py"), "3.5"],
        cwd=workdir,
        env=tm_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    facts, summary = observe_only(workdir)
    assert facts == []
    assert "observe_only" not in summary["facts"]
    hellos = [r for r in read_events(run_dirs(workdir)[-1]) if r["kind"] == "hello"]
    assert hellos and all(r["pid"] != os.getpid() for r in hellos)
