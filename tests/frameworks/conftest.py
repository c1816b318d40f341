"""Helpers for the framework tests: a script run plainly and under the real `tm`."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from ..conftest import read_events, run_tm, tm_env, together

SCRIPTS = Path(__file__).resolve().parent / "scripts"


class Ran:
    """One run of a script: its exit status, output, and the JSON line it printed last."""

    def __init__(self, done: subprocess.CompletedProcess) -> None:
        self.returncode = done.returncode
        self.stdout = done.stdout
        self.stderr = done.stderr
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        self.answer: dict = json.loads(lines[-1]) if lines else {}

    def check(self) -> Ran:
        assert self.returncode == 0, f"exit {self.returncode}\n{self.stdout}\n{self.stderr}"
        assert self.answer, f"the script printed no answer\n{self.stdout}\n{self.stderr}"
        return self


def copy_script(workdir: Path, name: str) -> Path:
    target = workdir / name
    shutil.copy(SCRIPTS / name, target)
    return target


def run_plain(workdir: Path, args: list[str], env: dict[str, str], timeout: float = 240) -> Ran:
    """`python ARGS` the way the user runs it without trainmeter."""
    done = subprocess.run(
        [sys.executable, *args],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return Ran(done)


def run_pair(
    workdir: Path, script: str, args: list[str], tm_args: list[str],
    env: dict[str, str] | None = None,
) -> tuple[Ran, Ran]:
    """`python SCRIPT ARGS` run plainly and `tm TM_ARGS SCRIPT ARGS` beside it, at once (two
    processes on the box's two cores: the time of one). The plain run works in `workdir/plain`
    on its own copy of the script, so what the trackers write beside it (wandb, tb, mlruns,
    lightning_logs, hf_out) never meets the run under `tm`, which works in `workdir`."""
    env = env or tm_env()
    plain_dir = workdir / "plain"
    plain_dir.mkdir(exist_ok=True)
    copy_script(plain_dir, script)
    copy_script(workdir, script)
    plain, under = together(
        lambda: run_plain(plain_dir, [script, *args], env),
        lambda: Ran(run_tm([*tm_args, script, *args], workdir, env=env)),
    )
    return plain, under


def metric_records(run_dir: Path, via: str | None = None) -> list[dict]:
    return [
        r["d"]
        for r in read_events(run_dir)
        if r["kind"] == "metric" and (via is None or r["d"].get("via") == via)
    ]
