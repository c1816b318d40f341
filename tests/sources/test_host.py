"""The process tree sampler on real processes: CPU of a busy child, RSS of a memory holder."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from trainmeter.sources.host import HostSampler

# The child says "go" once started and then waits for the test's line on stdin (no CPU), so the
# baseline sample lands after its start-up and before it burns, however slow the machine; then
# it busy-loops until it has spent 1 CPU second (not a span of wall time: on a loaded machine
# 2 s of wall time bought it too little CPU to measure) and prints the CPU seconds it spent
# burning, measured by itself.
BURNER = (
    "import sys, time\n"
    "print('go', flush=True)\n"
    "sys.stdin.readline()\n"
    "c0 = time.process_time()\n"
    "print('burn', flush=True)\n"
    "while time.process_time() - c0 < 1.0: pass\n"
    "print(time.process_time() - c0, flush=True)\n"
)
# The root starts the burner (which shares its stdin), waits for it (so the burner is reaped into
# the root's children_* times), then lingers until the test's second line, so the test samples
# the tree after the reap and before the root ends.
ROOT = (
    "import subprocess, sys\n"
    f"p = subprocess.Popen([sys.executable, '-c', {BURNER!r}])\n"
    "p.wait()\n"
    "sys.stdin.readline()\n"
)


def _wait_for(pred, timeout=60.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = pred()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


@pytest.mark.slow
def test_busy_child_cpu_is_counted_and_survives_its_reap():
    root = subprocess.Popen(
        [sys.executable, "-c", ROOT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        host = HostSampler(root.pid)
        assert root.stdout.readline().strip() == "go"  # the burner started up, now waits
        first = host.sample()
        assert len(first["pids"]) == 2 and root.pid in first["pids"]
        root.stdin.write("burn\n")
        root.stdin.flush()
        # inside the burn: the tree's CPU grows by about one core
        assert root.stdout.readline().strip() == "burn"
        t_a = time.monotonic()  # before the sample: the widest interval the two reads span
        a = host.sample()
        # wait until the tree has burnt a fifth of a CPU second, however loaded the machine
        b = _wait_for(lambda: (s := host.sample()).get("cpu_s", 0) - a["cpu_s"] >= 0.2 and s)
        t_b = time.monotonic()  # after the sample
        assert b["procs"] == 2
        cores = (b["cpu_s"] - a["cpu_s"]) / (t_b - t_a)
        # one busy loop is one core at most, whatever the load (counting the burner twice, its
        # own times and the root's children_* times, would read about 2); the slack is /proc's
        # 10 ms CPU ticks over 0.2 s
        assert cores < 1.15, cores
        # after the burner exits and is reaped, only the root is left ...
        after = _wait_for(lambda: (s := host.sample()).get("procs") == 1 and s)
        out, _ = root.communicate("done\n", timeout=60)
    finally:
        root.kill()
        root.wait()
    burn_cpu = float(out)
    # ... and its CPU seconds did not vanish: they moved into the root's children_* times.
    # The tree's growth matches what the burner measured itself (its startup CPU fell before
    # `first`; the sleeping root adds almost nothing).
    grown = after["cpu_s"] - first["cpu_s"]
    assert grown == pytest.approx(burn_cpu, abs=0.2), (grown, burn_cpu)


HOLDER = (
    "import sys, time\n"
    "block = b'\\x01' * (200 * 1024 * 1024)\n"  # 200 MiB, every page written by the fill
    "print('ready', flush=True)\n"
    "sys.stdin.readline()\n"
)


def test_memory_holder_rss():
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        d = HostSampler(proc.pid).sample()
        assert d["procs"] == 1 and d["pids"] == [proc.pid]
        # 200 MiB = 204800 KiB, plus the interpreter itself (~10-40 MiB)
        assert 204_800 <= d["rss_kb"] <= 204_800 + 60 * 1024, d["rss_kb"]
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


def test_gone_process_gives_zero_procs_and_a_reason():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    d = HostSampler(proc.pid).sample()
    assert d["procs"] == 0 and d["pids"] == []
    assert "cpu_s" not in d and d["missing"]["cpu_s"] == "the process has exited"


def test_zombie_root_counts_as_exited():
    # a child that exits but is not waited for stays a zombie: it is not running anything
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    _wait_for(lambda: psutil.Process(proc.pid).status() == psutil.STATUS_ZOMBIE)
    try:
        d = HostSampler(proc.pid).sample()
        assert d["procs"] == 0
    finally:
        proc.wait()


class _Times:
    def __init__(self, user: float, children_user: float = 0.0) -> None:
        self.user, self.system = user, 0.0
        self.children_user, self.children_system = children_user, 0.0


class _Mem:
    rss = 1024 * 1024


class _FakeProc:
    """A process whose reads follow a script: each read pops the next answer (or exception)."""

    def __init__(self, pid: int, answers: list, children: list | None = None) -> None:
        self.pid, self.answers, self.kids = pid, answers, children

    def is_running(self) -> bool:
        return True

    def status(self) -> str:
        return psutil.STATUS_SLEEPING

    def children(self, recursive: bool = False) -> list:
        return self.kids.pop(0)

    def oneshot(self):
        import contextlib

        return contextlib.nullcontext()

    def cpu_times(self) -> _Times:
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def memory_info(self) -> _Mem:
        return _Mem()


def test_a_child_reaped_during_the_read_is_read_again_not_lost():
    # The race a loaded CI machine hit (the tree's CPU read 0.0 s grown after a 1 s burn): the
    # root is read before the parent reaps its worker, the worker is gone when its turn comes.
    # That read is low by the worker's whole CPU time; the sampler reads the tree again.
    worker_first = _FakeProc(11, [psutil.NoSuchProcess(11)])
    root = _FakeProc(
        10,
        [_Times(0.5, children_user=0.0), _Times(0.5, children_user=3.0)],
        children=[[worker_first], []],
    )
    host = HostSampler(10)
    host._root = root
    d = host.sample()
    assert d["procs"] == 1 and d["pids"] == [10]
    assert d["cpu_s"] == 3.5  # the worker's 3 s are in the root's children_* times now
    assert root.answers == [] and root.kids == []  # read twice, no more


def test_a_tree_that_keeps_racing_gives_its_last_read():
    kids = [[_FakeProc(20 + i, [psutil.NoSuchProcess(20 + i)])] for i in range(3)]
    root = _FakeProc(10, [_Times(0.5)] * 3, children=kids)
    host = HostSampler(10)
    host._root = root
    d = host.sample()
    assert d == {"procs": 1, "pids": [10], "cpu_s": 0.5, "rss_kb": 1024}
    assert kids == [] and root.answers == []  # three reads, then it stops trying
