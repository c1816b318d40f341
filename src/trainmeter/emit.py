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


def emit(**values: Any) -> None:
    """Record named numbers for this run: series such as `train_loss`, or facts such as
    `tokens_per_step`. A no-op outside `tm`."""
    try:
        # The steady call, in this one frame: the live sender's `hot` ring (`emit_hot`: set by
        # the outbox once the sender, its thread and this process's ring are in place; cleared
        # by whatever ends one of them), a known key, a finite float, a number below the ring's
        # `limit`: one `next()` for the number, its slot's offset and the clock, one
        # `pack_into`. Anything else (the first call, a new key, a NumPy number or a tensor, a
        # full ring, outside `tm`) takes the outbox's checked path, which does what this did
        # before it existed.
        hot = _sender_module.emit_hot
        if hot is None:
            sender = _sender_module._sender  # None outside tm: nothing to look up
            if sender is None or sender.quiet:
                sender = _get_sender()
                if sender is None:
                    return
            _put(sender, values, _steps.n_steps, _monotonic(), _skip)
            return
        ids, stamped, mm, ring = hot
        # The last key is taken out of the keyword dictionary (fresh, ours alone) without the
        # iterator a loop makes: alone (the common call), it is the one written below; with
        # others, they go first, each the same way, in the order given, and it goes last.
        key, value = values.popitem()
        if values:  # several keys: all of them in the order given (this last), one time
            t = _monotonic()
            step = _steps.n_steps
            values[key] = value
            for key in values:
                value = values[key]
                try:
                    kid = ids[key]
                except KeyError:  # a new key (or one the key table refused): checked
                    _put(ring.owner, {key: value}, step, t, _skip)
                    continue
                if type(value) is not float or value - value:
                    _put(ring.owner, {key: value}, step, t, _skip)  # checked
                    continue
                at, seq = next(ring.numbers)
                try:
                    if seq < ring.limit:
                        _pack(mm, at, kid, step, t, value, seq)
                    else:
                        _put_numbered(ring, seq, kid, key, value, "emit", step, t)
                except Exception:  # noqa: BLE001 - the number taken must not stay unwritten
                    _put_numbered(ring, seq, -1, key, value, "emit", step, t)  # counted
            return
        # One key. One `try` for the id and the write (a `try` costs a jump over its handlers
        # where its body does not end in a return: two bytecodes), so the handlers tell apart
        # what they catch by type: a KeyError is a new key (nothing else in it raises one), any
        # other exception came from writing the number taken (the checked write below catches
        # its own).
        try:
            kid = ids[key]
            if type(value) is float and not value - value:  # a float, not inf - inf or nan
                at, seq, t = next(stamped)
                if seq < ring.limit:
                    return _pack(mm, at, kid, _steps.n_steps, t, value, seq)
                try:  # at or past the limit: the checked write (rare)
                    return _put_numbered(ring, seq, kid, key, value, "emit", _steps.n_steps, t)
                except Exception:  # noqa: BLE001 - the number taken must not stay unwritten
                    return _put_numbered(ring, seq, -1, key, value, "emit", _steps.n_steps, t)
        except KeyError:  # a new key (or one the key table refused): the checked path
            return _put(ring.owner, {key: value}, _steps.n_steps, _monotonic(), _skip)
        except Exception:  # noqa: BLE001 - the number taken must not stay unwritten
            return _put_numbered(ring, seq, -1, key, value, "emit", _steps.n_steps, t)  # counted
        _put(ring.owner, {key: value}, _steps.n_steps, _monotonic(), _skip)  # not a float: checked
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
