"""`ObserverSet.reads`: the keys a replay's samples compose, worked out once and again only when
the observers may have changed (one dropped after it raised, the list replaced or of another
length). A stale answer would hand a view a sample without a key it reads."""

from __future__ import annotations

from typing import Any

from trainmeter.runlog.observers import ObserverSet


class _Reads:
    def __init__(self, reads: frozenset[str] | None, fail: bool = False) -> None:
        if reads is not None:
            self.reads = reads
        self.fail = fail

    def on_snapshot(self, snap: dict[str, Any], now: float) -> None:
        if self.fail:
            raise RuntimeError("broken view")


def test_reads_is_the_union_and_follows_a_dropped_view() -> None:
    a, b = _Reads(frozenset({"steps"})), _Reads(frozenset({"mfu"}), fail=True)
    views = ObserverSet([a, b], lambda *_: None)
    assert views.reads() == {"steps", "mfu"}
    assert views.reads() == {"steps", "mfu"}  # the kept answer
    views.snapshot({}, 1.0)  # b raises and is dropped
    assert views.observers == [a]
    assert views.reads() == {"steps"}


def test_a_view_that_does_not_say_gets_every_key_until_it_is_dropped() -> None:
    a, anything = _Reads(frozenset({"steps"})), _Reads(None, fail=True)
    views = ObserverSet([a, anything], lambda *_: None)
    assert views.reads() is None
    views.snapshot({}, 1.0)
    assert views.reads() == {"steps"}


def test_reads_follows_the_list_replaced_or_grown() -> None:
    a, b = _Reads(frozenset({"steps"})), _Reads(frozenset({"time"}))
    views = ObserverSet([a], lambda *_: None)
    assert views.reads() == {"steps"}
    views.observers.append(b)
    assert views.reads() == {"steps", "time"}
    views.observers = [b]
    assert views.reads() == {"time"}
    assert ObserverSet([], lambda *_: None).reads() == frozenset()
