"""Nothing finished is lost, nothing is sent twice, however the training process ends
(promise 10). Real `tm` runs and real processes; each test is one short script."""

from __future__ import annotations

import collections
import functools
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import read_events, run_dirs, run_tm

SCRIPTS = Path(__file__).resolve().parent / "scripts"


def _log(cwd: Path) -> list[dict]:
    dirs = run_dirs(cwd)
    assert dirs, "no run directory"
    return read_events(dirs[-1])


DEATHS = [
    (300, "KILL", 128 + signal.SIGKILL),
    (40, "KILL", 128 + signal.SIGKILL),
    (120, "TERM", 128 + signal.SIGTERM),
    (120, "HUP", 128 + signal.SIGHUP),
    (120, "INT", None),  # KeyboardInterrupt: Python's own exit status for it
]
METHODS = ["fork", "spawn"]


def _die_after(steps: int, how: str, cwd: Path) -> tuple[Path, subprocess.CompletedProcess]:
    return cwd, run_tm(
        ["-q", "--no-web", "--", sys.executable, str(SCRIPTS / "die_after.py"), str(steps), how], cwd
    )


def _forking(method: str, cwd: Path) -> tuple[Path, subprocess.CompletedProcess]:
    return cwd, run_tm(
        ["-q", "--no-web", "--", sys.executable, str(SCRIPTS / "forking_trainer.py"), method], cwd
    )


#: Each case's one run under `tm`, made two at a time (see runs_two_at_a_time): counts and the
#: log only, nothing timed. (The 100k emits' loop, below, runs alone: it tests the throughput
#: of tm's ingest against the agent's, which a second run beside it would share.)
SINGLES = {
    **{f"test_every_finished_step_and_value_survives_the_death[{s}-{h}-{st}]":
       functools.partial(_die_after, s, h) for s, h, st in DEATHS},
    **{f"test_forked_and_spawned_workers_deliver_each_value_once[{m}]":
       functools.partial(_forking, m) for m in METHODS},
}


@pytest.mark.slow
@pytest.mark.parametrize(("steps", "how", "status"), DEATHS)
def test_every_finished_step_and_value_survives_the_death(run, steps, how, status) -> None:
    """SIGKILL after 300 and after 40 steps; SIGTERM and SIGHUP (Python's default: no atexit);
    SIGINT. (os._exit is the forked workers' way out, below.)"""
    workdir, out = run
    assert f"DONE {steps}" in out.stdout, out.stderr
    if status is not None:
        assert out.returncode == status, out.stderr
    events = _log(workdir)
    step_records = [r for r in events if r["kind"] == "step"]
    assert sum(r["d"]["k"] for r in step_records) == steps
    assert max(r["d"]["n"] for r in step_records) == steps
    # 2 x 8 token ids a step, every one of them counted once
    assert sum(r["d"].get("tokens", 0) for r in step_records) == steps * 16
    losses = [r for r in events if r["kind"] == "metric" and r["d"]["key"] == "loss"]
    assert len(losses) == steps
    assert sorted(r["q"] for r in losses) == list(range(1, steps + 1))  # each once, in order
    assert events[-1]["kind"] == "run.end"


@pytest.mark.slow
@pytest.mark.parametrize("method", METHODS)
def test_forked_and_spawned_workers_deliver_each_value_once(run, method) -> None:
    workdir, out = run
    assert out.returncode == 0 and "DONE" in out.stdout, out.stderr
    seen = collections.Counter(
        (r["d"]["key"], r["d"]["value"])
        for r in _log(workdir)
        if r["kind"] == "metric"
    )
    by_key = collections.Counter(key for key, _ in seen)
    expected = {"parent_value": 50, "worker_value": 100}
    if method == "fork":
        expected["loader_value"] = 64  # DataLoader workers, num_workers=2
    assert by_key == expected
    assert set(seen.values()) == {1}  # nothing twice: the parent's unsent values stay its own
    if method == "fork":  # a forked trainer: its 7 steps counted once, apart from the parent's
        steps = [r for r in _log(workdir) if r["kind"] == "step"]
        assert sum(r["d"]["k"] for r in steps) == 15
        assert sum(r["d"]["tokens"] for r in steps) == 15 * 4
        by_pid = collections.Counter()
        for r in steps:
            by_pid[r["pid"]] += r["d"]["k"]
        assert sorted(by_pid.values()) == [7, 8]


def test_a_tight_loop_of_100k_emits_reaches_the_log_whole(workdir) -> None:
    code = "from trainmeter import emit\nfor i in range(100000): emit(x=float(i))\n"
    out = run_tm(["-q", "--no-web", "--", sys.executable, "-c", code], workdir)
    assert out.returncode == 0, out.stderr
    values = [r["d"]["value"] for r in _log(workdir) if r["kind"] == "metric"]
    assert values == [float(i) for i in range(100000)]  # all, once, in order
