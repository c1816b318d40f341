"""Values as the agents' rings hold them, turned into record lines by `tm`, not by the training.

The agent's sender thread ships the ring's slots as they are (`agent.outbox.drain_values`): a
header (pid, rank, the first and last value numbers), the key table entries not sent before,
then the 36-byte slots. Formatting each value as a JSON line (two float `repr`s, a string) is
work the training process no longer does; `tm` does it here, into exactly the line the agent
used to send (`agent.outbox.template`), so the log, the replay and the recovery after a death
(`supervisor.ring`, by the number `q`) are unchanged. A slot whose number is not the one its
place says (a refused value's stale slot) is passed over: its value was counted when refused.
"""

from __future__ import annotations

from types import SimpleNamespace

from ..agent import outbox
from ..agent import ring as layout

_MAGIC = outbox.VALUES_MAGIC
_HEAD = outbox.VALUES_HEAD
_KEY_LEN = layout.KEY_LEN
_iter_slots = layout.SLOT.iter_unpack
_SLOT = layout.SLOT_BYTES


def is_values(data: bytes) -> bool:
    return data[: len(_MAGIC)] == _MAGIC


def slots_in(data: bytes) -> int:
    """About how many values a damaged values datagram held (its lost records' count)."""
    return max((len(data) - len(_MAGIC) - _HEAD.size) // _SLOT, 1)


class ValueLines:
    """Per process: its key table and the record templates of its keys."""

    def __init__(self) -> None:
        self.keys: dict[int, list[tuple[str, str]]] = {}
        self.forms: dict[tuple[int, int, int], tuple[str, str | None]] = {}
        self.bad = 0  # datagrams that could not be read (counted by the caller)

    def lines(self, data: bytes) -> list[bytes]:
        """The record lines of one values datagram (raises ValueError on a damaged one)."""
        at = len(_MAGIC)
        pid, rank, first, last, first_key, n_keys = _HEAD.unpack_from(data, at)
        at += _HEAD.size
        keys = self.keys.setdefault(pid, [])
        if first_key > len(keys):
            raise ValueError("key table entries missing")
        if first_key < len(keys):  # a new table from this pid: another program after an exec
            del keys[first_key:]
            for form in [f for f in self.forms if f[0] == pid and f[2] >= first_key]:
                del self.forms[form]  # (pid, rank, key id): the old program's lines
        for _ in range(n_keys):
            (length,) = _KEY_LEN.unpack_from(data, at)
            via, _, key = data[at + 2 : at + 2 + length].decode("utf-8", "replace").partition("\0")
            keys.append((via, key))
            at += 2 + length
        body = memoryview(data)[at:]
        if len(body) % _SLOT:
            raise ValueError("a slot cut short")
        sender = SimpleNamespace(pid=pid, rank=None if rank < 0 else rank)
        forms = self.forms
        out: list[bytes] = []
        append = out.append
        for kid, step, t, value, seq in _iter_slots(body):
            if not first <= seq <= last or not 0 <= kid < len(keys):
                continue  # a refused number's stale slot
            form = forms.get((pid, rank, kid))  # a rank learned late makes new lines
            if form is None:
                via, key = keys[kid]
                form = forms[(pid, rank, kid)] = outbox.template_pair(sender, via, key)
            plain, stepped = form
            if step >= 0 and stepped is not None:
                append((stepped % (t, value, step, seq)).encode())
            else:
                append((plain % (t, value, seq)).encode())
        return out
