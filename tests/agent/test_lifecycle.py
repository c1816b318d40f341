"""An exec or an os._exit keeps what the process recorded (issue 27 item 4), in one process:
every `os.exec*` goes through the wrapper, which sends what waits and counts what cannot go,
and an exec that fails leaves the process as it was."""

from __future__ import annotations

import os
import posix

import pytest
from tests.socket_collector import SocketCollector

from trainmeter.agent import lifecycle, ring
from trainmeter.agent import sender as sender_module
from trainmeter.emit import emit


@pytest.fixture
def collector(collector: SocketCollector, monkeypatch: pytest.MonkeyPatch) -> SocketCollector:
    """conftest's collector, with os._exit and the exec calls wrapped (put back at the end)."""
    for module in (os, posix):  # the wrappers go when the test ends
        for name in ("_exit", "execv", "execve"):
            monkeypatch.setattr(module, name, getattr(module, name))
    monkeypatch.setattr(lifecycle, "_installed", False)
    lifecycle.install()
    return collector


def test_every_exec_function_goes_through_the_wrapper(collector) -> None:
    for module in (os, posix):
        for name in ("_exit", "execv", "execve"):
            assert hasattr(getattr(module, name), "__trainmeter_original__"), (module, name)
    lifecycle.install()  # twice: still one wrapper, not a wrapper of a wrapper
    assert not hasattr(os.execv.__trainmeter_original__, "__trainmeter_original__")


@pytest.mark.parametrize("call", ["execvp", "execlp", "execvpe", "execle"])
def test_a_failed_exec_sends_what_waited_and_leaves_the_process_as_it_was(collector, call) -> None:
    emit(x=1.0, y=2.0)  # waiting in the ring: the sender's thread has not flushed
    missing = "/nonexistent/trainmeter-no-such-program"
    with pytest.raises(OSError):
        if call == "execvp":
            os.execvp(missing, [missing])
        elif call == "execlp":
            os.execlp(missing, missing)
        elif call == "execvpe":
            os.execvpe(missing, [missing], {})
        else:
            os.execle(missing, missing, {})
    collector.receive_now()  # no flush of ours: what the exec's own flush sent
    assert sorted(r["d"]["key"] for r in collector.received if r["kind"] == "metric") == ["x", "y"]
    sender = sender_module.get_sender()
    assert sender._lock.acquire(blocking=False)  # given back: the program goes on
    sender._lock.release()
    emit(z=3.0)
    assert [r["d"]["key"] for r in collector.records() if r["kind"] == "metric"] == ["x", "y", "z"]


def test_what_cannot_go_before_an_exec_is_counted_in_the_ring_and_undone_if_it_fails(
    collector,
) -> None:
    emit(x=1.0)
    collector.records()
    sender = sender_module.get_sender()
    the_ring = ring.current()
    sender.flush = lambda: None  # type: ignore[method-assign]  # a receiver that takes nothing
    sender._queue.append({"v": 1})  # a record only this process holds
    sender._backlog.append((b"{}", 0, 1, 0))  # and a refused datagram of one such record
    sender.send("phase", {"name": "data", "s": 0.5, "n": 1})  # kept in the ring: not lost
    left = sender.before_exec(0.0)
    assert left == 2
    assert the_ring.h[ring.H_DROPPED_SENDER] == 2  # where the next program's tm reads it
    sender.exec_failed(left)
    assert the_ring.h[ring.H_DROPPED_SENDER] == 0
    assert sender._lock.acquire(blocking=False)
    sender._lock.release()
