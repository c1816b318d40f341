"""What one `emit()` costs the training thread, and what shipping values costs the sender, counted.

Timing `emit` in a test would be noise on a shared machine; counting is not: `sys.setprofile`
sees every Python function entered and every C function called, the same on every machine. The
steady call (a known key, a finite float, the sender and the ring in place) is one Python frame,
`emit` itself, and three C calls: the key taken out of the keyword dictionary (`popitem`), the
value's number with its slot's offset and the clock (one `next` on the ring's zip: the clock is
read in C, where `sys.setprofile` does not see it), the slot's `pack_into`. Several keys read the
clock once and add two calls a key (its id is a subscript, not a call). On 6 December (before
issue 30) the same call entered `put_emitted` as well (a second frame, with the ring looked up
and checked again there); until issue 30's emit2 the key's id was a `dict.get` call for each
key, and two keys made seven C calls; until emit3 the clock was a call of its own.

The sender's side is counted per datagram, not per value: a flush that ships thousands of values
makes a few dozen calls for each window of the ring it reads (the numbers read in one C call and
checked by their sum), none for each value.
"""

from __future__ import annotations

from typing import Any

import pytest
from tests.call_events import events

from trainmeter.agent import ring
from trainmeter.agent import sender as sender_module
from trainmeter.emit import emit

#: The steady `emit(train_loss=x)`: emit's frame, then the key and its value out of the keyword
#: dictionary (`dict.popitem`: no iterator), the number with its slot's offset and the time
#: (`next` on the ring's zip, which reads the clock in C) and the write (`Struct.pack_into`).
#: The key's id is a subscript: no call.
ONE_KEY = [
    ("call", "emit"),
    ("c_call", "popitem"),
    ("c_call", "next"),
    ("c_call", "pack_into"),
]
#: `emit(train_loss=x, lr=y)`: the last key's `popitem` and the clock once (one time for the
#: call), then the number and the write for each key (train_loss first: the order given).
TWO_KEYS = [("call", "emit"), ("c_call", "popitem"), ("c_call", "monotonic")] + [
    ("c_call", "next"),
    ("c_call", "pack_into"),
] * 2

#: Calls the sender thread's flush may make to ship `SHIPPED` values: 362 today (5 datagrams of
#: a few windows each), 319 on 6 December; one call a value would be thousands.
SHIPPED = 8000
FLUSH_BUDGET = 600


def _metrics(records: list[dict[str, Any]], key: str) -> list[float]:
    return [r["d"]["value"] for r in records if r["kind"] == "metric" and r["d"]["key"] == key]


def test_a_steady_emit_is_one_frame_and_three_c_calls(collector) -> None:
    emit(train_loss=0.25, lr=0.1)  # the first call: the sender, its thread, the ring, the keys
    assert events(emit, train_loss=0.5) == ONE_KEY
    assert events(emit, train_loss=0.75, lr=0.2) == TWO_KEYS
    # and the counted calls did their work: every value arrives, in order, with its step
    got = collector.records()
    assert _metrics(got, "train_loss") == [0.25, 0.5, 0.75]
    assert _metrics(got, "lr") == [0.1, 0.2]
    assert [r["q"] for r in got if r["kind"] == "metric"] == [1, 2, 3, 4, 5]


def test_the_steady_path_steps_aside_for_anything_it_does_not_cover(collector) -> None:
    """A new key, a number that is not a float, a value that is not a finite number, a full
    ring: each goes through the outbox's checked path (more calls), and the value comes out
    exactly as before."""
    emit(x=1.0)
    assert len(events(emit, y=2.0)) > len(ONE_KEY)  # a new key: its id is made
    assert len(events(emit, x=3)) > len(ONE_KEY)  # an int: read as a number
    emit(x=float("inf"), y=4.0)  # skipped with one warning, y goes through
    the_ring = ring.current()
    assert the_ring is not None
    the_ring.tail -= ring.CAPACITY  # as if a whole ring of values were unshipped
    emit(x=5.0)  # refused and counted, not written over what tm may still need
    the_ring.tail += ring.CAPACITY
    assert events(emit, x=6.0) == ONE_KEY  # steady again
    got = collector.records()
    assert _metrics(got, "x") == [1.0, 3.0, 6.0]
    assert _metrics(got, "y") == [2.0, 4.0]
    assert the_ring.h[ring.H_DROPPED_FULL] == 1


def test_the_steady_path_ends_with_its_sender(collector) -> None:
    emit(x=1.0)
    sender = sender_module.get_sender()
    assert sender is not None and sender.hot is ring.active
    # what emit reads: the live sender's hot ring, its key ids and its stamped numbers
    assert sender_module.emit_hot is ring.active.emit_path
    sender.go_quiet()  # the supervisor is gone
    assert sender.hot is None and sender_module.emit_hot is None
    assert emit(x=2.0) is None  # nothing written, nothing raised


def test_a_new_sender_never_finds_an_earlier_ones_ring_hot(
    collector, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`emit_hot` belongs to the live sender: one made after another (a test's, as here) that
    never went quiet starts with none, so emit cannot write into the earlier one's ring."""
    emit(x=1.0)
    earlier = sender_module.get_sender()
    assert earlier is not None and sender_module.emit_hot is not None
    monkeypatch.setattr(sender_module, "_sender", None)
    monkeypatch.setattr(sender_module, "_sender_checked", False)
    later = sender_module.get_sender()
    try:
        assert later is not earlier and sender_module.emit_hot is None
        earlier.hot = ring.active  # the earlier sender, no longer the live one, sets it again
        assert sender_module.emit_hot is None  # ... and emit does not see it
    finally:
        later.go_quiet()


def test_shipping_costs_calls_per_window_not_per_value(collector) -> None:
    emit(x=0.0)
    collector.records()
    for i in range(SHIPPED):
        emit(x=float(i))
    sender = sender_module.get_sender()
    assert sender is not None
    calls = events(sender.flush)
    assert len(calls) <= FLUSH_BUDGET, f"{len(calls)} calls to ship {SHIPPED} values"
    collector.receive_now()
    assert _metrics(collector.all(), "x") == [0.0] + [float(i) for i in range(SHIPPED)]
