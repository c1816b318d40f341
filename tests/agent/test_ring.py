"""The ring in one process: values numbered once, taken by `tm` exactly above what the socket
delivered, refusals counted, the sender's drops kept where `tm` reads them."""

from __future__ import annotations

import pytest
from tests.socket_collector import SocketCollector

from trainmeter.agent import outbox, ring
from trainmeter.agent import sender as sender_module
from trainmeter.emit import emit


def _values(records: list[dict], key: str = "x") -> list[float]:
    return [r["d"]["value"] for r in records if r["kind"] == "metric" and r["d"]["key"] == key]


def test_tm_takes_from_the_ring_exactly_what_the_socket_did_not_bring(collector) -> None:
    for i in range(10):
        emit(x=float(i))
    collector.records()  # flushed: 1..10 delivered by the socket
    for i in range(10, 15):
        emit(x=float(i))  # accepted, never sent: the process "dies" here
    collector.finish()
    assert _values(collector.received) == [float(i) for i in range(10)]
    assert _values(collector.recovered) == [float(i) for i in range(10, 15)]
    assert [r["q"] for r in collector.recovered] == [11, 12, 13, 14, 15]
    assert all(r["d"]["recovered"] is True for r in collector.recovered)


def test_a_full_ring_refuses_counts_and_never_stalls(collector, monkeypatch) -> None:
    emit(x=0.0)
    the_ring = ring.current()
    assert the_ring is not None
    the_ring.tail -= ring.CAPACITY  # as if a whole ring of values were still unshipped
    emit(x=1.0, y=2.0)  # both refused: counted, numbers 2 and 3 skipped
    the_ring.tail += ring.CAPACITY
    emit(x=3.0)
    got = collector.records()
    assert _values(got) == [0.0, 3.0]
    assert [r["q"] for r in got if r["kind"] == "metric"] == [1, 4]
    dropped = [r["d"]["value"] for r in got if r["d"].get("key") == "agent_dropped_records"]
    assert dropped == [2]
    assert the_ring.h[ring.H_DROPPED_FULL] == 2


def test_each_drop_is_counted_with_its_cause(collector) -> None:
    """Every record lost in the process is counted where it was lost, and why: the fact's
    note says each cause (issue 19 item 2)."""
    emit(x=0.0)
    the_ring = ring.current()
    the_ring.tail -= ring.CAPACITY
    emit(x=1.0)  # refused: the ring is full
    the_ring.tail += ring.CAPACITY
    sender = sender_module.get_sender()
    sender.send("fact", {"key": "huge", "value": "a" * 70_000, "source": "detected"})
    sender.send("fact", {"key": "bad", "value": float("nan"), "source": "detected"})
    got = collector.records()
    sender.flush()  # the count made in one flush goes out in the next
    got += collector.records()
    [fact] = [r for r in got if r["d"].get("key") == "agent_dropped_records"][-1:]
    assert fact["d"]["value"] == 3
    note = fact["d"]["note"]
    assert "1 not encodable as JSON" in note and "1 too large for a datagram" in note
    assert "1 refused by the ring" in note


def test_drops_at_exit_are_counted_in_the_ring_when_the_socket_is_full(collector) -> None:
    sender = sender_module.get_sender()
    emit(x=1.0)
    collector.records()
    # a record only the socket carries, and a receiver that takes nothing more
    sender.send("phase", {"name": "data", "s": 0.5, "n": 1})
    sender.flush = lambda: None  # type: ignore[method-assign]  # every send "fails"
    sender._queue.append({"v": 1})  # stands for one record still waiting
    sender._backlog.append((b"{}", 0, 1, 0))  # and one datagram the receiver refused
    sender.flush_at_exit(timeout=0.05)
    # the waiting record and the refused datagram are lost; the phase is not (issue 29 item
    # 12): numbered, it waits in the ring, and tm logs it from there
    assert sender.at_exit_left == 2
    collector.finish()
    facts = [r for r in collector.recovered if r["d"].get("key") == "agent_dropped_records"]
    assert [f["d"]["value"] for f in facts] == [2]
    assert "could not deliver" in facts[0]["d"]["note"]
    phases = [r for r in collector.recovered if r["kind"] == "phase"]
    assert [p["d"]["name"] for p in phases] == ["data"] and phases[0]["recovered"] is True


def test_odd_keys_travel_as_written(collector) -> None:
    keys = ['acc%', 'a"b', "loss/é", "x%s%d", "tab\there"]
    emit(**{key: 1.0 for key in keys})
    got = [r["d"]["key"] for r in collector.records() if r["kind"] == "metric"]
    assert got == keys


def test_giving_up_at_exit_leaves_the_rest_to_the_ring_and_ships_nothing_past_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    col = SocketCollector(rcvbuf=4096)  # a receiver that is soon full
    monkeypatch.setenv(sender_module.SOCKET_ENV, col.path)
    monkeypatch.setattr(sender_module, "_sender", None)
    monkeypatch.setattr(sender_module, "_sender_checked", False)
    outbox.clear()
    sender = sender_module.get_sender()
    sender.interval = 3600.0
    try:
        for i in range(30000):  # more than the receiver's queue of datagrams holds
            emit(x=float(i))
        sender.flush_at_exit(timeout=0.0)  # full at once: gives up
        col.receive_now()  # the receiver catches up ...
        sender.flush()  # ... and the sender thread ticks once more during shutdown
        col.finish()
        assert _values(col.all()) == [float(i) for i in range(30000)]  # each once, none lost
        assert col.recovered  # the part the socket could not take came from the ring
    finally:
        sender.go_quiet()
        outbox.clear()
        col.close()


def test_a_step_no_slot_can_hold_never_stalls_the_values_after_it(collector) -> None:
    outbox.put("loss", 0.5, "wandb", 10**20)  # a tracker's absurd step: the value still goes
    emit(x=1.0)
    got = [r for r in collector.records() if r["kind"] == "metric"]
    assert [(r["d"]["key"], "step" in r["d"]) for r in got] == [("loss", False), ("x", True)]


def test_unshipped_counts_what_waits_without_peeking_into_the_counter(collector) -> None:
    """The exit flush waits while values wait: `Ring.unshipped()` is nonzero exactly then (it
    replaced reading the number counter's repr)."""
    for i in range(5):
        emit(y=float(i))
    r = ring.active
    assert r is not None and r.unshipped() >= 1  # written, not taken
    collector.records()  # the sender takes and ships them all
    assert r.unshipped() == 0
    emit(y=9.0)
    assert r.unshipped() == 1  # one written, not taken yet


def test_tm_formats_the_rings_values_into_the_agents_own_lines(collector) -> None:
    """The binary values datagram, formatted by tm, gives byte for byte the lines the agent
    used to format itself: steps or none, facts, a refused number passed over; the key table
    goes once, then only its new entries."""
    from trainmeter.supervisor.values import ValueLines

    emit(x=0.5)
    the_ring = ring.current()
    the_ring.tail -= ring.CAPACITY
    emit(x=1.0)  # refused: its number (2) is skipped
    the_ring.tail += ring.CAPACITY
    outbox.put("loss", 2.25, "wandb", 7)
    emit(tokens_per_step=4096.0, y=-3.5e-12)
    start = the_ring.read
    skipped = set(the_ring.skipped)
    agent_lines, last = outbox.drain_lines(100)
    the_ring.read, the_ring.skipped = start, skipped
    datagram, count, last_values = outbox.drain_values(100)
    assert last_values == last == 5 and count == 4
    formatted = ValueLines()
    assert formatted.lines(datagram) == agent_lines
    assert the_ring.keys_sent == 4
    emit(y=1.0, z=2.0)  # one known key, one new
    datagram, count, _ = outbox.drain_values(100)
    assert count == 2 and datagram.count(b"emit\x00") == 1  # only z's entry goes
    assert [line.count(b'"key":"z"') for line in formatted.lines(datagram)] == [0, 1]
