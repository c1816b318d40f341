"""Where named values wait until the sender thread ships them: `emit()` and the taps.

Both are called on the training thread, once per logged value, so `put` does the least that
keeps the value safe: it writes the value into this process's ring (`agent.ring`, shared memory
that survives any death of the process) and returns. No JSON, no datagram, no lock.

The sender thread takes the written values in order (`drain_lines`) and turns each into one
line of JSON with its sequence number `q`; `tm` uses the number to take from the ring, after the
process ended, exactly the values the socket did not deliver. Without a ring (the file could not
be made) values wait in a list instead, and what is left of it at exit is counted as dropped.
"""

from __future__ import annotations

import os
import struct
import time

from .. import records
from ..payloads import value_is_fact
from ..records import MAX_DATAGRAM
from . import ring as ring_module
from . import sender as sender_module
from .sender import get_sender
from .values import as_number

KEY_ENTRY = ring_module.KEY_LEN

_pack = ring_module.SLOT.pack_into
_SLOTS_AT = ring_module.SLOTS_AT
_SLOT_BYTES = ring_module.SLOT_BYTES
_CAPACITY = ring_module.CAPACITY
_MASK = ring_module.CAPACITY - 1
_H_SOCKET_ONLY = ring_module.H_SOCKET_ONLY

TYPE_CHECKING = False  # typing costs ~9 ms at start-up in every Python the run starts
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_pending: list[tuple[str, float, str, int | None, float]] = []  # only when there is no ring
_registered_for: object = None
#: key id -> (the record line with holes for t, value, step and q; whether it takes a step)
_templates: dict[int, tuple[str, bool]] = {}
_templates_for: object = None


def _learned_rank(rank: int) -> None:
    """Line templates carry the rank they were made with: made again with the one learned."""
    global _templates_for
    _templates_for = None


sender_module.rank_listeners.append(_learned_rank)


def put(key: str, value: float, via: str, step: int | None, t: float | None = None) -> None:
    """Keep one value (`via` is `emit` or a tap's name). A no-op outside `tm`."""
    sender = get_sender()
    if sender is None:
        return  # outside tm, or the supervisor is gone: nothing to tell
    put_for(sender, key, value, via, step, time.monotonic() if t is None else t)


def put_for(sender: Any, key: str, value: float, via: str, step: int | None, t: float) -> None:
    """`put` for a caller that already holds the live sender."""
    ring = ring_module.active
    if ring is None or ring.owner is not sender or sender._thread is None or _registered_for is not sender:
        ring = _first_value(sender)
        if ring is None:
            _pending.append((key, value, via, step, t))
            if sender.idle:
                sender.wake()
            return
    kid = ring.keys.get((via, key))
    if kid is None:
        kid = ring.key_id(key, via)
    put_numbered(ring, next(ring.numbers)[1], kid, key, value, via, step, t)
    if sender.idle:  # a backed-off sender: its tick comes back for this value (`Sender.wake`)
        sender.wake()


def put_numbered(
    ring: ring_module.Ring,
    seq: int,
    kid: int,
    key: str,
    value: float,
    via: str,
    step: int | None,
    t: float,
) -> None:
    """Write the value numbered `seq` (just taken from `ring.numbers`) into its slot, or count why
    it cannot be: the checked write, for every number at or above `ring.limit` (`emit` writes
    below it without a check)."""
    if kid < 0 or seq - ring.tail >= _CAPACITY:
        _refuse(ring, seq, kid)  # counted; both readers step over the unused number
        return
    if seq >= ring.room and not ring.grow():
        ring.skipped.add(seq)  # no room for its page: the socket alone takes it, counted
        ring.h[_H_SOCKET_ONLY] += 1
        _pending.append((key, value, via, step, t))
        return
    if step is None or not -1 <= step < 1 << 63:
        step = -1  # none, or a tracker's step no slot can hold: the value still goes
    try:
        _pack(ring.mm, _SLOTS_AT + (seq & _MASK) * _SLOT_BYTES, kid, step, t, value, seq)
    except Exception:  # noqa: BLE001 - never leave a number unwritten: readers wait on it
        _refuse(ring, seq, -1)


def put_emitted(
    sender: Any, values: dict[str, Any], step: int, t: float, skip: Callable[[str], None]
) -> None:
    """`emit`'s keyword arguments into the ring, each key alone (`skip(key)` for one that is
    not a finite number): `emit`'s checked path (its first value, a new key, a number that is
    not a plain float, no ring, a backed-off sender). Once everything is in place the sender's
    `hot` says so, and `emit` writes its next values itself."""
    ring = ring_module.active
    if ring is None or ring.owner is not sender or sender._thread is None or _registered_for is not sender:
        ring = _first_value(sender)
    if (
        ring is not None
        and ring.owner is sender
        and ring is ring_module.active
        and sender._thread is not None
        and _registered_for is sender
        and not sender.quiet
        and sender._hot is not ring  # `hot` is a property: set once, not read on every call
    ):
        sender.hot = ring
    for key, value in values.items():
        try:
            if type(value) is float and value - value == 0.0:
                number = value  # the common case, finite, without a call
            else:
                number = as_number(value)
                if number is None:
                    skip(key)
                    continue
            if ring is None:
                _pending.append((key, number, "emit", step, t))
                continue
            kid = ring.emit_ids.get(key)
            if kid is None:
                kid = ring.key_id(key, "emit")
                if kid >= 0:
                    ring.emit_ids[key] = kid
            put_numbered(ring, next(ring.numbers)[1], kid, key, number, "emit", step, t)
        except Exception:  # noqa: BLE001 - promise 1: this key is lost to us, not the others
            skip(key)
    if sender.idle:
        # the sender backed off (and cleared `hot`, which sent this call here): the values
        # written, its tick comes back (after them: a tick that finds nothing backs off again)
        sender.wake()


def _refuse(ring: ring_module.Ring, seq: int, kid: int) -> None:
    """The ring is full (or its key table): count the value; its number stays unused."""
    ring.h[ring_module.H_DROPPED_KEYS if kid < 0 else ring_module.H_DROPPED_FULL] += 1
    ring.skipped.add(seq)


def _first_value(sender: Any) -> ring_module.Ring | None:
    """The first value of a sender (a new process, a forked child, a test): hook the outbox
    into it, start its thread, and find or make the ring. The ring may exist already (the step
    probe makes it at the first optimizer step): the sender must still learn to ship from it."""
    if _registered_for is not sender:
        _register(sender)
    if sender._thread is None:
        sender._start()  # a forked child's first value starts its own sender
    return ring_module.current()


def _register(sender: object) -> None:
    global _registered_for
    _registered_for = sender
    sender.add_drain(_drain_pending)  # type: ignore[attr-defined]
    sender.ring_source = drain_lines  # type: ignore[attr-defined]
    sender.ring_values = drain_values  # type: ignore[attr-defined]
    sender.on_shipped = _shipped  # type: ignore[attr-defined]
    sender.ring_pending = _ring_pending  # type: ignore[attr-defined]
    sender.pending_count = pending  # type: ignore[attr-defined]
    sender.ring_dropped = _ring_dropped  # type: ignore[attr-defined]
    sender.drop_note = drop_note  # type: ignore[attr-defined]


def drop_note(sender_dropped: int) -> str:
    """Why this process's values were dropped, in words (the note of `agent_dropped_records`)."""
    ring = ring_module.active
    full = keys = 0
    if ring is not None:
        full = ring.h[ring_module.H_DROPPED_FULL]
        keys = ring.h[ring_module.H_DROPPED_KEYS]
    parts = []
    if keys:
        parts.append(
            f"{keys} values under keys the agent could not store: its key table "
            f"({ring_module.KEYS_BYTES // 1024} KiB of key names, "
            f"{len(ring.key_names) if ring is not None else 0} distinct keys) was full, or a key "
            "was longer than 64 KiB; log fewer distinct keys (a key per step or per sample is "
            "a series name gone wrong)"
        )
    if full:
        parts.append(
            f"{full} values refused because the receiver fell {ring_module.CAPACITY} values behind"
        )
    if sender_dropped:
        parts.append(f"{sender_dropped} records the sender could not deliver")
    return "; ".join(parts)


def _ring_dropped(sender_dropped: int) -> int:
    """Keep the sender's drop count in the ring's header; return the values the ring refused."""
    ring = ring_module.active
    if ring is None:
        return 0
    h = ring.h
    h[ring_module.H_DROPPED_SENDER] = sender_dropped
    return h[ring_module.H_DROPPED_FULL] + h[ring_module.H_DROPPED_KEYS]


def _shipped(last_q: int) -> None:
    """Values up to `last_q` left in a datagram: their slots may be reused."""
    ring = ring_module.active
    if ring is not None and last_q >= ring.tail:
        ring.tail = last_q + 1


def _ring_pending() -> int:
    """Values in the ring not yet shipped (`Ring.unshipped`: nonzero while any wait)."""
    ring = ring_module.active
    return 0 if ring is None else ring.unshipped()


#: Stand-ins for the numbers a template leaves open: JSON strings no number can be.
_HOLES = {"t": "\x00t", "value": "\x00v", "step": "\x00s", "q": "\x00q"}


def template(sender: object, via: str, key: str, stepped: bool = False) -> str:
    """The JSON line of one value, with %-holes for t, value, (with `stepped`) step, and q.

    The record is `records.value_record`'s (the one rule for what a value becomes), encoded
    once with stand-ins where the numbers go; the sender fills the holes with `%` for each value.
    """
    import json  # here, not at the agent's start: only a process without a ring needs it

    hole = {name: json.dumps(mark) for name, mark in _HOLES.items()}
    record = records.value_record(
        key,
        _HOLES["value"],
        via,
        _HOLES["step"] if stepped else None,
        t=_HOLES["t"],
        rank=None if sender.rank is None else int(sender.rank),  # type: ignore[attr-defined]
        pid=int(sender.pid),  # type: ignore[attr-defined]
        q=_HOLES["q"],
    )
    line = json.dumps(record, separators=(",", ":")).replace("%", "%%")  # a key's "%" is no hole
    line = line.replace(hole["t"], "%r", 1)  # the envelope's t comes before any key
    for name, form in (("value", "%r"), ("step", "%d"), ("q", "%d")):
        at = line.rfind(hole[name])  # the value, step and q come after the key
        if at >= 0:
            line = line[:at] + form + line[at + len(hole[name]) :]
    return line


def template_pair(sender: object, via: str, key: str) -> tuple[str, str | None]:
    """(the line without a step, the line with one) of a value of `key` given through `via`;
    the second is None for a fact, which carries no step (`payloads.value_is_fact`)."""
    plain = template(sender, via, key)
    return plain, None if value_is_fact(via, key) else template(sender, via, key, stepped=True)


#: A datagram of values as the ring holds them (`tm` formats them, not the training process):
#: MAGIC, the header, the new key table entries, then whole slots.
VALUES_MAGIC = b"\x00TMV1"
VALUES_HEAD = struct.Struct("<qqqqII")  # pid, rank (-1: none), first seq, last seq, first key, keys


def drain_values(limit: int) -> tuple[bytes, int, int]:
    """Sender thread: up to `limit` values from the ring as one binary datagram, how many
    records it stands for, and the number of the last value taken (0: none).

    No per-value work here beyond the ring's own window reads: the slots' bytes go as they
    are, with the key table entries `tm` has not been sent yet; `tm` formats the records."""
    sender = get_sender()
    ring = ring_module.active
    if sender is None or ring is None:
        return b"", 0, 0
    names = ring.key_names
    first_key = ring.keys_sent
    key_bytes = b"".join(
        KEY_ENTRY.pack(len(e)) + e
        for e in (f"{via}\0{key}".encode("utf-8", "replace") for via, key in names[first_key:])
    )
    room = (MAX_DATAGRAM - len(VALUES_MAGIC) - VALUES_HEAD.size - len(key_bytes)) // _SLOT_BYTES
    chunks: list[bytes] = []
    first, last, count = ring.take_bytes(max(min(limit, room), 1), chunks)
    if not last:
        return b"", 0, 0
    ring.keys_sent = len(names)
    rank = -1 if sender.rank is None else int(sender.rank)
    head = VALUES_HEAD.pack(int(sender.pid), rank, first, last, first_key, len(names) - first_key)
    datagram = b"".join((VALUES_MAGIC, head, key_bytes, *chunks))  # the slots' one copy
    return datagram, count, last


def drain_lines(limit: int) -> tuple[list[bytes], int]:
    """Sender thread: up to `limit` values from the ring as record lines, and the number of the
    last value taken (0: none)."""
    global _templates_for
    sender = get_sender()
    ring = ring_module.active
    if sender is None or ring is None:
        return [], 0
    if _templates_for is not ring:
        _templates_for = ring
        _templates.clear()
    lines: list[bytes] = []
    append = lines.append
    templates = _templates
    names = ring.key_names
    taken = ring.take(limit)
    for seq, kid, step, t, value in taken:
        if kid < 0:
            continue  # a refused value's tombstone: counted already, nothing to send
        forms = templates.get(kid)
        if forms is None:
            via, key = names[kid]
            forms = templates[kid] = template_pair(sender, via, key)
        plain, stepped = forms
        try:
            if step >= 0 and stepped is not None:
                append((stepped % (t, value, step, seq)).encode())
            else:  # a value given before the first step, or a fact
                append((plain % (t, value, seq)).encode())
        except (TypeError, ValueError):  # cannot happen for a float; if it did: counted
            sender.drop(1, "not formattable")
    return lines, taken[-1][0] if taken else 0


def _drain_pending() -> None:
    """Without a ring: turn the listed values into records, in order."""
    sender = get_sender()
    if sender is None or not _pending:
        return
    batch = _pending[:]
    del _pending[: len(batch)]  # appends made meanwhile stay for the next drain
    for key, value, via, step, t in batch:
        record = records.value_record(key, value, via, step, t=t)
        sender.send(record["kind"], record["d"], record["src"], t)


def pending() -> int:
    """Values listed without a ring and not yet turned into records (counted at exit)."""
    return len(_pending)


def clear() -> None:
    """Forget what is queued, and the ring (tests)."""
    _pending.clear()
    ring_module.forget()


def _forked() -> None:
    """A forked child: values its parent listed without a ring are the parent's to send."""
    _pending.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)
