"""`tm`'s side of the rings: what it believes of a file in the socket directory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

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


def test_a_new_program_sets_the_earlier_ring_aside_and_tm_reads_each_against_its_own(
    tmp_path,
) -> None:
    """An exec (same pid, new program) must not overwrite the earlier program's ring: it is
    renamed with its image number, and tm reads it against what that program delivered, the new
    ring against what came after the new-image notice (issue 27 item 4)."""
    path = layout.path_for(str(tmp_path), 77)
    first = layout.Ring(path, 77, None)
    first.h[layout.H_STEPS] = 30  # 30 steps, of which 25 were delivered
    assert layout.set_aside(path) == 1
    assert os.path.exists(path + ".0") and not os.path.exists(path)
    second = layout.Ring(path, 77, None, image=1)
    second.h[layout.H_STEPS] = 5  # the new program's own 5, none delivered yet
    assert layout.set_aside(path) == 2 and os.path.exists(path + ".1")  # and once more
    os.rename(path + ".1", path)
    delivered = ring.Delivered()
    delivered.see({"kind": "step", "src": "agent", "pid": 77, "d": {"k": 25, "n": 25}})
    got: list[dict] = []
    ring.recover(ring.open_rings(str(tmp_path)), delivered, lambda line, r: got.append(r))
    assert [(r["d"]["k"], r["d"]["n"]) for r in got if r["kind"] == "step"] == [(5, 30), (5, 5)]
    first.close()
    second.close()


def test_the_new_image_notice_reads_the_set_aside_ring_there_and_is_not_logged(tmp_path) -> None:
    path = layout.path_for(str(tmp_path), 78)
    old = layout.Ring(path, 78, None)
    old.h[layout.H_STEPS] = 3
    layout.set_aside(path)
    delivered, got, known = ring.Delivered(), [], {}
    delivered.on_new_image = lambda pid: ring.recover_set_aside(
        str(tmp_path), known, pid, delivered, lambda line, r: got.append(r)
    )
    sink: list[dict] = []
    watched = delivered.wrap(lambda line, r: sink.append(r))
    watched(b"", {"kind": "step", "src": "agent", "pid": 78, "d": {"k": 1, "n": 1}})
    watched(b"", {"kind": "fact", "src": "agent", "pid": 78, "r": 1,
                  "d": {"key": layout.IMAGE_FACT, "value": 1}})
    assert [r["kind"] for r in sink] == ["step"]  # the notice itself is not logged
    assert [(r["d"]["k"], r["d"]["n"]) for r in got] == [(2, 3)]  # 3 counted, 1 delivered
    assert delivered.steps.get(78) is None  # the new program starts from nothing
    assert list(known.values()) == [None]  # read there, not again at the end
    old.close()


def test_a_process_that_finds_no_room_takes_a_spare_tm_kept(tmp_path, monkeypatch) -> None:
    assert ring.keep_spares(str(tmp_path)) == ring.SPARES
    assert ring.keep_spares(str(tmp_path)) == 0  # kept, not made again
    spares = sorted(p.name for p in tmp_path.iterdir())
    assert spares == ["spare.0", "spare.1"]

    def full(path):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(layout, "_new_file", full)
    path = layout.path_for(str(tmp_path), 79)
    taken = layout.Ring(path, 79, None)
    assert taken.h[layout.H_RESERVED] == layout.SPARE_SLOTS and taken.h[layout.H_PID] == 79
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ring.79", "spare.1"]
    layout.Ring(layout.path_for(str(tmp_path), 80), 80, None).close()
    with pytest.raises(OSError):  # none left
        layout.Ring(layout.path_for(str(tmp_path), 81), 81, None)
    taken.close()
