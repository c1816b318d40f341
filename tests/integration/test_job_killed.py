"""A torchrun job that dies as a whole keeps, in the log, every step each rank made.

When a memory cgroup's OOM killer takes one rank, torchrun stops the others and exits; a cgroup
kill or a scheduler may also end every process of the job at once. No rank flushes then, so the
steps finished since the agent's last send (up to one send interval) live only in the rank's
ring, and `tm` reads every rank's ring once torchrun has ended. These runs make those deaths
happen for real (torchrun, gloo, CPU, SIGKILL instead of a cgroup so that no machine setting is
needed) and hold the log to the steps each rank printed.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tests.conftest import read_events, reserved_port, run_dirs, run_tm, tm_env

pytestmark = pytest.mark.slow

SCRIPT = str(Path(__file__).parent / "scripts" / "job_killed.py")


def _torchrun(how: str, steps: int, cwd: Path):
    # a port held from its pick (29000 + pid % 400 was anybody's: another job's store, a
    # connection's local port)
    holder, port = reserved_port()
    try:
        argv = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                "--master-port", str(port), SCRIPT, how, str(steps)]
        return run_tm(["--no-web", *argv], cwd, env=tm_env(OMP_NUM_THREADS="1"))
    finally:
        holder.close()


def _made(stdout: str) -> dict[int, int]:
    """rank -> the last step it printed."""
    made: dict[int, int] = {}
    for rank, n in re.findall(r"^STEP (\d+) (\d+)$", stdout, re.M):
        made[int(rank)] = max(made.get(int(rank), 0), int(n))
    return made


def _logged(cwd: Path) -> tuple[dict[int, int], dict[int, int]]:
    """rank -> steps in its step records, and -> steps in its recovered ones (from the rings)."""
    steps: dict[int, int] = {}
    recovered: dict[int, int] = {}
    for record in read_events(run_dirs(cwd)[-1]):
        if record.get("kind") != "step" or record.get("src") != "agent":
            continue
        rank, d = record.get("rank") or 0, record["d"]
        steps[rank] = steps.get(rank, 0) + d.get("k", 1)
        if d.get("recovered"):
            recovered[rank] = recovered.get(rank, 0) + d.get("k", 1)
    return steps, recovered


def test_a_job_killed_as_a_whole_keeps_every_ranks_steps(tmp_path: Path) -> None:
    run = _torchrun("whole", 12, tmp_path)
    assert run.returncode == 137, run.stderr  # torchrun itself was SIGKILLed
    made = _made(run.stdout)
    steps, recovered = _logged(tmp_path)
    assert made[0] == 12  # rank 0 printed its last step before the kill
    assert steps[0] == 12
    # Rank 1 may have finished a step and not printed it yet, never more than that one.
    assert made[1] <= steps[1] <= min(made[1] + 1, 12)
    # Rank 0 died microseconds after its last step: only its ring could hold that one.
    assert recovered.get(0, 0) >= 1
    end = [ln for ln in run.stderr.splitlines() if ln.startswith("trainmeter:") and "; run " in ln]
    assert len(end) == 1 and ", 12 steps," in end[0], run.stderr


def test_a_rank_killed_before_its_first_step_leaves_the_others_steps(tmp_path: Path) -> None:
    run = _torchrun("first", 5, tmp_path)
    assert run.returncode == 1, run.stderr  # torchrun's own status for a failed worker
    made = _made(run.stdout)
    steps, _ = _logged(tmp_path)
    assert 0 not in made and 0 not in steps
    assert made[1] >= 5
    assert made[1] <= steps[1] <= made[1] + 1  # torchrun's SIGTERM may land before the print
    # The end line counts the node's clock, its local rank 0 (docs/ranks.md), which made none.
    end = [ln for ln in run.stderr.splitlines() if ln.startswith("trainmeter:") and "; run " in ln]
    assert len(end) == 1 and ", 0 steps," in end[0], run.stderr
