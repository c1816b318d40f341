"""`emit(...)`: the one optional line a training loop can add.

    from trainmeter import emit
    emit(train_loss=loss.item())

Outside `tm` it does nothing. Inside, each value is written to the agent's ring (shared memory
the sender thread ships from, and `tm` reads after the process ends), so a call costs about a
dict update, no value is lost to a full socket or a killed process, and none is sent twice.
It returns None, never raises, and never converts a tensor that lives on an accelerator:
numbers, NumPy scalars and 0-d arrays, and 0-dimensional CPU tensors only (a tensor that
requires grad is read through `detach()` so autograd is left alone). Each key stands alone: one
that is not a finite number is skipped with one warning and the others go through. Keys in
`FACT_KEYS` are facts about the run, not series.
"""

from __future__ import annotations

import sys
import time

from .agent import ring as _layout
from .agent import sender as _sender_module
from .agent.outbox import put_emitted as _put
from .agent.outbox import put_numbered as _put_numbered
from .agent.probes.step_state import state as _steps  # the step count, without the probe
from .agent.sender import get_sender as _get_sender
from .agent.values import as_number  # noqa: F401 - part of the public surface (tests)
from .records import FACT_KEYS  # noqa: F401 - part of the public surface

TYPE_CHECKING = False  # typing costs ~9 ms at start-up in every Python the run starts
if TYPE_CHECKING:
    from typing import Any

_warned: set[str] = set()
_monotonic = time.monotonic
_pack = _layout.SLOT.pack_into
_SLOT_BYTES = _layout.SLOT_BYTES
_MASK = _layout.CAPACITY - 1


def emit(**values: Any) -> None:
    """Record named numbers for this run: series such as `train_loss`, or facts such as
    `tokens_per_step`. A no-op outside `tm`."""
    try:
        # The steady call, in this one frame: the sender's `hot` ring (set by the outbox once
        # the sender, its thread and this process's ring are in place; cleared by whatever
        # ends one of them), a known key, a finite float, a number below the ring's `limit`:
        # one clock read, one number, one `pack_into`. Anything else (the first call, a new
        # key, a NumPy number or a tensor, a full ring, outside `tm`) takes the outbox's
        # checked path, which does what this did before it existed.
        sender = _sender_module._sender  # None outside tm: no exception to raise and catch
        ring = None if sender is None else sender.hot
        if ring is None:
            if sender is None or sender.quiet:
                sender = _get_sender()
                if sender is None:
                    return
            _put(sender, values, _steps.n_steps, _monotonic(), _skip)
            return
        t = _monotonic()
        # The last key is taken out of the keyword dictionary (fresh, ours alone) without the
        # iterator a loop makes: alone (the common call), it is the one written below; with
        # others, they go first, each the same way, in the order given, and it goes last.
        key, value = values.popitem()
        if values:
            step = _steps.n_steps
            ids = ring.emit_ids
            for other in values:
                number = values[other]
                try:
                    kid = ids[other]
                except KeyError:  # a new key (or one the key table refused): checked
                    _put(sender, {other: number}, step, t, _skip)
                    continue
                if type(number) is not float or number - number != 0.0:
                    _put(sender, {other: number}, step, t, _skip)  # checked
                    continue
                seq = next(ring.seq)
                try:
                    if seq < ring.limit:
                        _pack(ring.slots, (seq & _MASK) * _SLOT_BYTES, kid, step, t, number, seq)
                    else:
                        _put_numbered(ring, seq, kid, other, number, "emit", step, t)
                except Exception:  # noqa: BLE001 - the number taken must not stay unwritten
                    _put_numbered(ring, seq, -1, other, number, "emit", step, t)  # counted
        try:
            kid = ring.emit_ids[key]
        except KeyError:  # a new key (or one the key table refused): the checked path
            _put(sender, {key: value}, _steps.n_steps, t, _skip)
            return
        if type(value) is not float or value - value != 0.0:
            _put(sender, {key: value}, _steps.n_steps, t, _skip)
            return
        seq = next(ring.seq)
        try:
            if seq < ring.limit:
                _pack(ring.slots, (seq & _MASK) * _SLOT_BYTES, kid, _steps.n_steps, t, value, seq)
            else:
                _put_numbered(ring, seq, kid, key, value, "emit", _steps.n_steps, t)
        except Exception:  # noqa: BLE001 - the number taken must not stay unwritten
            _put_numbered(ring, seq, -1, key, value, "emit", _steps.n_steps, t)  # counted
    except Exception:  # noqa: BLE001 - promise 1: never raise into the training loop
        return


def _skip(key: str) -> None:
    """One warning per key that was refused."""
    try:
        if key not in _warned:
            _warned.add(key)
            print(
                f"trainmeter: emit({key}=...) skipped: not a finite number on the host",
                file=sys.stderr,
            )
    except Exception:  # noqa: BLE001 - stderr closed: stay silent
        pass
