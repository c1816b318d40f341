"""Real runs that the tests of what a run leaves behind (passport, exports, report) share.

One example run is made per session (short: 20 steps of the README's tiny GPT), on the replayed
H100 of the NVML fixtures so that MFU, energy and the ladder are there to check.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ..conftest import REPO, run_dirs, run_tm, tm_env

SCRIPTS = Path(__file__).resolve().parent / "scripts"
FAKE_H100 = REPO / "tests" / "fixtures" / "nvml" / "h100_sxm_gpm.json"
HF_TOKEN = "hf_TopSecretValue0123456789"
API_KEY = "sk-AnotherSecret-abcdef123456"
STEPS = 20


class ExampleRun:
    def __init__(self, cwd: Path, run_dir: Path, truth: dict, stderr: str) -> None:
        self.cwd = cwd
        self.run_dir = run_dir
        self.truth = truth
        self.stderr = stderr
        self.summary = json.loads((run_dir / "summary.json").read_text())


@pytest.fixture(scope="session")
def example_run(tmp_path_factory: pytest.TempPathFactory) -> ExampleRun:
    cwd = tmp_path_factory.mktemp("records")
    report = cwd / "truth.json"
    result = run_tm(
        [
            "--convention", "megatron", "--budget-steps", str(2 * STEPS), "--name", "passported",
            str(SCRIPTS / "with_secret.py"), "--hf-token", HF_TOKEN, f"--api-key={API_KEY}",
            "--steps", str(STEPS), "--report", str(report), "--quiet",
        ],
        cwd=cwd,
        env=tm_env(TRAINMETER_FAKE_NVML=str(FAKE_H100)),
    )
    assert result.returncode == 0, result.stderr
    (run_dir,) = run_dirs(cwd)
    return ExampleRun(cwd, run_dir, json.loads(report.read_text()), result.stderr)


def tm_cli(args: list[str], cwd: Path, **kw):
    """`tm ARGS` for the commands about finished runs (no training: quick)."""
    return run_tm(args, cwd=cwd, timeout=120, **kw)


__all__ = ["ExampleRun", "example_run", "tm_cli", "SCRIPTS", "sys"]
