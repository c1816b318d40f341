"""An idle sender backs off, and whatever brings work brings its tick back: counted on a fake clock.

Each wake of the sender thread costs the process ~100 µs of CPU on a small VM (the wake-up and
a cold flush), twenty times a second whether or not the loop gives it anything. Timing that
in a test would be noise; counting is not. The thread's loop (`Sender._run`) runs here on the
test's own thread against a fake bell: a wait of t seconds returns at once with the fake clock
t later, or at the moment something scheduled rings it. Every wait the loop asks for and every
flush it makes is counted.
"""

from __future__ import annotations

import _thread
import os
from collections.abc import Callable
from typing import Any

import pytest
from tests.call_events import events

from trainmeter.agent import sender as sender_module
from trainmeter.agent.probes import memory, step_totals
from trainmeter.emit import emit

TICK = sender_module.INTERVAL_S
CAP = sender_module.IDLE_CAP_S
#: The waits of a sender that never gets anything: its tick until `IDLE_TICKS` ticks in a row
#: found nothing, one more that sets the flags (and finds nothing either), then the cap
FIRST = [TICK] * (sender_module.IDLE_TICKS + 1)


class FakeBell:
    """The sender's bell, on a fake clock. `acquire(timeout=t)` returns at once: True when
    rung (by `release`, from an action scheduled before t ran out, whose time it then is),
    else False with the clock t later. The loop ends (the sender goes quiet) at `end`."""

    def __init__(self, sender: Any, end: float) -> None:
        self.sender = sender
        self.end = end
        self.now = 0.0
        self.waits: list[tuple[float, float]] = []  # (when, how long it was asked to wait)
        self.rung = False
        self.actions: list[tuple[float, Callable[[], None]]] = []

    def at(self, when: float, action: Callable[[], None]) -> None:
        self.actions.append((when, action))
        self.actions.sort(key=lambda a: a[0])

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if not blocking:
            rung, self.rung = self.rung, False
            return rung
        self.waits.append((self.now, timeout))
        due = self.now + timeout
        while not self.rung and self.actions and self.actions[0][0] <= due:
            when, action = self.actions.pop(0)
            self.now = max(self.now, when)
            action()
        if self.rung:
            self.rung = False
            return True
        self.now = due
        if self.now >= self.end:
            self.sender.quiet = True  # the loop's end (the fixture's go_quiet follows)
        return False

    def release(self) -> None:
        if self.rung:
            raise RuntimeError("release unlocked lock")
        self.rung = True


@pytest.fixture
def idle_sender(collector, monkeypatch) -> tuple[Any, FakeBell, list[float]]:
    """The process's sender at its real tick, its thread's loop to be run by the test on a
    fake bell, each flush's (fake) time counted. The first value is in place (`hot` set)."""
    sender = sender_module.get_sender()
    sender.interval = TICK
    sender._thread = _thread.get_ident()  # the loop runs here: no thread of its own
    emit(x=0.0)
    collector.records()
    bell = FakeBell(sender, end=60.0)
    sender._bell = bell
    flushes: list[float] = []
    real_flush = sender.flush

    def flush() -> None:
        flushes.append(bell.now)
        real_flush()

    monkeypatch.setattr(sender, "flush", flush)
    monkeypatch.setattr(step_totals, "step_listeners", [])
    return sender, bell, flushes


def _waits_after(bell: FakeBell, t: float) -> list[float]:
    return [w for when, w in bell.waits if when >= t]


def test_an_idle_sender_wakes_twice_a_second_not_twenty_times(idle_sender) -> None:
    sender, bell, flushes = idle_sender
    sender._run()
    waits = [w for _, w in bell.waits]
    assert waits[: len(FIRST)] == FIRST
    assert set(waits[len(FIRST) :]) == {CAP}
    # 60 s with nothing to ship: 123 flushes (1,200 at the tick)
    assert len(flushes) == len(FIRST) + round((60.0 - sum(FIRST)) / CAP)
    assert len(flushes) < 60.0 / TICK / 9
    # backed off: emit's steady path is off (its checked path wakes the sender), and the next
    # step wakes it (the step probe's listener, armed only now)
    assert sender.idle and sender.hot is None
    assert step_totals.step_listeners == [step_totals._wake_on_step]


def test_a_value_brings_the_tick_back_at_once_and_emit_is_steady_again(
    idle_sender, collector
) -> None:
    from tests.agent.test_emit_budget import ONE_KEY

    sender, bell, flushes = idle_sender
    steady: list[list[tuple[str, str]]] = []

    def values() -> None:
        emit(x=1.0)  # the checked path: hot was cleared; it wakes the sender
        steady.append(events(emit, x=2.0))  # the steady call again

    bell.at(10.0, values)
    sender._run()
    assert steady == [ONE_KEY]
    assert 10.0 in flushes  # the flush that shipped them came at once, not at the next tick
    after = _waits_after(bell, 10.0)
    assert after[: len(FIRST)] == FIRST and set(after[len(FIRST) :]) == {CAP}
    collector.receive_now()
    assert [r["d"]["value"] for r in collector.received if r["kind"] == "metric"] == [0.0, 1.0, 2.0]


def test_a_record_brings_the_tick_back_at_once(idle_sender, collector) -> None:
    sender, bell, flushes = idle_sender
    bell.at(20.0, lambda: sender.send("fact", {"key": "k", "value": 1, "source": "detected"}))
    sender._run()
    assert 20.0 in flushes
    assert _waits_after(bell, 20.0)[: len(FIRST)] == FIRST
    collector.receive_now()
    assert [r["d"]["key"] for r in collector.received if r["kind"] == "fact"] == ["k"]


def test_a_step_brings_the_tick_back_and_its_record_goes(idle_sender, collector, monkeypatch) -> None:
    """The steps' listener is armed only while the sender is backed off: the step that comes
    then calls it once (it takes itself off), the next step calls none."""
    sender, bell, flushes = idle_sender
    state = step_totals.state
    for name in ("n_steps", "n_micro", "c_micro", "c_calls", "last_ver", "t", "any_tokens"):
        monkeypatch.setattr(state, name, getattr(state, name))
    monkeypatch.setattr(state, "hdr", bytearray(len(state.hdr)))
    monkeypatch.setattr(state, "sent", step_totals.Totals(0, 0, 0, 0, 0, 0.0))
    monkeypatch.setattr(state, "n_steps", 0)
    monkeypatch.setattr(state, "any_tokens", False)
    monkeypatch.setattr(step_totals, "_lines", {})
    sender.add_drain(step_totals.drain)
    listeners: list[list[Any]] = []  # before each step, and after it

    def step() -> None:
        listeners.append(list(step_totals.step_listeners))
        step_totals.commit()
        listeners.append(list(step_totals.step_listeners))

    bell.at(30.0, step)
    bell.at(30.01, step)  # the next step, before the next tick: no listener any more
    sender._run()
    assert listeners == [[step_totals._wake_on_step], [], [], []]
    assert 30.0 in flushes
    assert _waits_after(bell, 30.0)[: len(FIRST)] == FIRST
    collector.receive_now()
    assert [r["d"]["n"] for r in collector.received if r["kind"] == "step"] == [1, 2]


def test_a_datagram_held_back_keeps_the_tick(idle_sender) -> None:
    """The socket path gone after a delivery (a /tmp cleaner): what waits is kept and tried
    again each tick until the give-up timer runs out; the thread never backs off meanwhile."""
    sender, bell, flushes = idle_sender
    bell.end = 5.0
    sender.path = sender.path + ".gone"
    sender.send("fact", {"key": "k", "value": 1, "source": "detected"})
    sender._run()
    assert sender._backlog  # still held: tried 100 times
    assert {w for _, w in bell.waits} == {TICK} and len(flushes) == len(bell.waits) >= 100
    assert not sender.idle


def test_memory_is_still_read_about_once_a_second_without_steps(idle_sender, monkeypatch) -> None:
    """The memory probe reads on the sender's clock when no step comes (a CPU run: always):
    backed off, its tick is half a second, so a reading is due at every second tick."""
    sender, bell, flushes = idle_sender
    clock = type("Clock", (), {"monotonic": staticmethod(lambda: bell.now)})
    readings: list[float] = []

    def read() -> dict[str, Any]:
        readings.append(bell.now)
        return {"device": "cpu", "rss_b": 1 << 20}

    monkeypatch.setattr(memory, "time", clock)
    monkeypatch.setattr(memory, "read", read)
    monkeypatch.setattr(memory, "_torch", None)
    monkeypatch.setattr(memory, "_fake", None)
    monkeypatch.setattr(memory, "_attached_pid", os.getpid())
    monkeypatch.setattr(memory, "_last_read", 0.0)
    monkeypatch.setattr(memory, "_last_sent", None)
    monkeypatch.setattr(memory, "_taken", None)
    sender.add_drain(memory._drain)
    sender._run()
    gaps = [b - a for a, b in zip(readings, readings[1:], strict=False)]
    assert len(readings) >= 58 and max(gaps) <= 1.0 + CAP + 1e-9
    assert len(flushes) <= len(FIRST) * 2 + round(60.0 / CAP)  # the reading sent once: a wake
