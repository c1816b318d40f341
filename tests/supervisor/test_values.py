"""`supervisor/values.py`: a values datagram made by hand, turned into record lines by tm."""

from __future__ import annotations

import json

from trainmeter.agent import outbox
from trainmeter.agent import ring as layout
from trainmeter.supervisor.values import ValueLines


def _datagram(pid: int, rank: int, first_key: int, keys: list[str], slots: list[tuple]) -> bytes:
    """The agent's layout (`outbox.drain_values`): header, new key entries, slots."""
    seqs = [slot[4] for slot in slots]
    head = outbox.VALUES_HEAD.pack(pid, rank, min(seqs), max(seqs), first_key, len(keys))
    entries = b""
    for key in keys:
        data = f"emit\0{key}".encode()
        entries += layout.KEY_LEN.pack(len(data)) + data
    return outbox.VALUES_MAGIC + head + entries + b"".join(layout.SLOT.pack(*s) for s in slots)


def _keys_values(lines: list[bytes]) -> list[tuple[str, float]]:
    return [(r["d"]["key"], r["d"]["value"]) for r in map(json.loads, lines)]


def test_a_program_after_an_exec_sends_its_own_key_table_and_its_values_are_read() -> None:
    """The same pid's key table from 0 again (a new program after an exec) raised ValueError
    ('too many values to unpack': the templates had become keyed by pid, rank and key id), the
    datagram was lost, and the table left cut short refused every later datagram of it."""
    values = ValueLines()
    before = values.lines(_datagram(42, 0, 0, ["loss"], [(0, 1, 10.0, 2.5, 1)]))
    assert _keys_values(before) == [("loss", 2.5)]
    after = values.lines(_datagram(42, 0, 0, ["acc"], [(0, 1, 11.0, 0.75, 1)]))
    assert _keys_values(after) == [("acc", 0.75)]
    later = values.lines(_datagram(42, 0, 1, ["lr"], [(0, 2, 12.0, 0.5, 2), (1, 2, 12.0, 3e-4, 3)]))
    assert _keys_values(later) == [("acc", 0.5), ("lr", 3e-4)]
