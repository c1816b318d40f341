"""Helpers for the framework tests: a script run plainly and under the real `tm`."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from ..conftest import read_events

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


def metric_records(run_dir: Path, via: str | None = None) -> list[dict]:
    return [
        r["d"]
        for r in read_events(run_dir)
        if r["kind"] == "metric" and (via is None or r["d"].get("via") == via)
    ]
