"""The end of a supervised run waits for late datagrams only from a process that can still send."""

from __future__ import annotations

import os
import sys
import time
from types import SimpleNamespace

import pytest

from trainmeter.supervisor.ending import agents_alive


def _recorder(*pids: int) -> SimpleNamespace:
    return SimpleNamespace(hello_pid_set=lambda: set(pids))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_an_exited_process_not_yet_reaped_sends_nothing_more() -> None:
    """A zombie (a DataLoader worker whose parent is gone, not yet reaped) still answers a
    liveness check; waiting the grace period for it was waiting for nothing."""
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    try:
        # until it has exited: at once, but a loaded machine may not run it for a while; a
        # deadline, not a count of tries (1,000 of 1 ms could run out first: the child then
        # still runs, and a running process may still send)
        deadline = time.monotonic() + 60
        while True:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                if b") Z" in fh.read():
                    break
            assert time.monotonic() < deadline, f"pid {pid} never exited"
            time.sleep(0.001)
        os.kill(pid, 0)  # still there: a zombie answers signal 0
        assert not agents_alive(_recorder(pid))
    finally:
        os.waitpid(pid, 0)
    assert not agents_alive(_recorder(pid))  # reaped: gone


def test_a_running_process_that_said_hello_may_still_send() -> None:
    assert agents_alive(_recorder(os.getpid()))
    assert not agents_alive(_recorder())
