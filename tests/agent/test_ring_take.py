"""The values datagram's read of the ring (`Ring.take_bytes`: whole windows checked in C) takes
exactly what the slot-by-slot read (`Ring.take`) takes: the same slots, the same numbers."""

from __future__ import annotations

import os
from pathlib import Path

from trainmeter.agent import ring


def _ring(tmp_path: Path, name: str, written: list[int], skipped: set[int]) -> ring.Ring:
    """A ring whose slots hold the numbers in `written` (others never written), numbers in
    `skipped` refused (their slots stale), as `outbox.put` leaves them."""
    r = ring.Ring(os.path.join(tmp_path, name), 1, None)
    for seq in written:
        at = ring.SLOTS_AT + (seq & r.mask) * ring.SLOT_BYTES
        ring.SLOT.pack_into(r.mm, at, seq % 7, seq, seq * 0.5, seq * 0.25, seq)
    r.skipped.update(skipped)
    return r


def _both(tmp_path: Path, written: list[int], skipped: set[int], limit: int) -> None:
    a = _ring(tmp_path, f"a{limit}", written, skipped)
    b = _ring(tmp_path, f"b{limit}", written, skipped)
    while True:
        slow: list[bytes] = []
        taken = a.take(limit, slow)
        fast: list[bytes] = []
        got = b.take_bytes(limit, fast)
        want = (taken[0][0], taken[-1][0], sum(v[1] >= 0 for v in taken)) if taken else (0, 0, 0)
        assert got == want
        assert b"".join(fast) == b"".join(slow)
        assert a.read == b.read
        if not taken:
            return


def test_a_run_of_written_values_in_windows_of_every_size(tmp_path: Path) -> None:
    _both(tmp_path, list(range(1, 3001)), set(), limit=2048)
    _both(tmp_path, list(range(1, 3001)), set(), limit=100)


def test_it_stops_at_the_first_slot_not_yet_written(tmp_path: Path) -> None:
    """Another thread took number 41 and has not written it yet: nothing after it goes."""
    _both(tmp_path, [n for n in range(1, 300) if n != 41], set(), limit=2048)


def test_refused_numbers_are_stepped_over_and_not_counted(tmp_path: Path) -> None:
    written = [n for n in range(1, 500) if n not in (10, 200)]
    _both(tmp_path, written, {10, 200}, limit=2048)


def test_a_slot_left_from_the_lap_before_is_not_taken_for_this_one(tmp_path: Path) -> None:
    """The window's check compares the sum of its slots' numbers with the sum they should have:
    a slot not yet written on this lap still holds its number of the lap before (smaller by the
    ring's capacity), so the sum falls short and nothing from that slot on goes."""
    lap = ring.CAPACITY
    this_lap = [lap + n for n in range(1, 300) if n != 41]
    rings = []
    for name in ("a", "b"):
        r = _ring(tmp_path, name, list(range(1, 300)) + this_lap, set())
        r.read = r.tail = lap + 1  # the first lap shipped
        rings.append(r)
    a, b = rings
    slow: list[bytes] = []
    fast: list[bytes] = []
    taken = a.take(2048, slow)
    assert b.take_bytes(2048, fast) == (lap + 1, lap + 40, 40)
    assert [v[0] for v in taken] == list(range(lap + 1, lap + 41))
    assert b"".join(fast) == b"".join(slow) and a.read == b.read == lap + 41
