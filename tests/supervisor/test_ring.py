"""`tm`'s side of the rings: what it believes of a file in the socket directory."""

from __future__ import annotations

import os
from pathlib import Path

from trainmeter.agent import ring as layout
from trainmeter.supervisor import ring


def test_files_that_are_not_rings_give_nothing_and_raise_nothing(tmp_path: Path) -> None:
    (tmp_path / "ring.1").write_bytes(os.urandom(layout.SLOTS_AT + 4096))  # garbage
    (tmp_path / "ring.2").write_bytes(b"short")  # too small to be one
    (tmp_path / "ingest.sock").write_bytes(b"")  # not named like a ring
    os.symlink("/etc/passwd", tmp_path / "ring.3")  # never followed
    maps = ring.open_rings(str(tmp_path))
    assert len(maps) == 1  # only the garbage file is big enough to be looked at
    got: list[dict] = []
    assert ring.recover(maps, ring.Delivered(), lambda line, record: got.append(record)) == 0
    assert got == []


def test_steps_are_the_ring_total_less_what_step_records_delivered() -> None:
    h = [0] * layout.HEADER_SLOTS
    h[layout.H_STEPS], h[layout.H_TOKENS], h[layout.H_MICRO] = 12, 48, 12
    h[layout.H_REAL] = 40
    h[layout.H_ANY_TOKENS] = 1
    h[layout.H_BASE_STEPS], h[layout.H_BASE_TOKENS], h[layout.H_BASE_MICRO] = 5, 20, 5
    h[layout.H_BASE_REAL] = 18
    # this (forked) process delivered one step record: n=8, 3 steps of 4 tokens (8 real)
    got = [3, 12, 8, 3]
    d = ring._missing_step(tuple(h), 1.0, got)
    # steps (12 - 5) - 3 = 4; tokens (48 - 20) - 12 = 16; real (40 - 18) - 8 = 14;
    # micro (12 - 5) - 3 = 4
    assert d == {"k": 4, "n": 12, "micro": 4, "tokens": 16, "real_tokens": 14, "recovered": True}
    # nothing delivered yet: all of this process's own steps, none of its parent's
    d = ring._missing_step(tuple(h), 1.0, None)
    assert d is not None and (d["k"], d["tokens"]) == (7, 28)
    # everything delivered: nothing to add
    assert ring._missing_step(tuple(h), 1.0, [7, 28, 22, 7]) is None


def test_a_step_record_that_never_arrived_is_taken_from_the_totals() -> None:
    """The agent does not count an undelivered step record as lost (issue 29 item 12): the
    ring's totals hold its steps. Records for steps 1-2 and 6-7 arrived, the one for 3-5 did
    not: what is missing is 3 steps, wherever they were, not the ones after the last n."""
    h = [0] * layout.HEADER_SLOTS
    h[layout.H_STEPS], h[layout.H_TOKENS], h[layout.H_MICRO], h[layout.H_ANY_TOKENS] = 7, 70, 7, 1
    delivered = ring.Delivered()
    for k, n in ((2, 2), (2, 7)):
        delivered.see({"kind": "step", "src": "agent", "pid": 9, "d": {"k": k, "n": n,
                       "tokens": 10 * k, "micro": k}})
    d = ring._missing_step(tuple(h), 1.0, delivered.steps[9])
    assert d is not None and (d["k"], d["n"], d["tokens"], d["micro"]) == (3, 7, 30, 3)
