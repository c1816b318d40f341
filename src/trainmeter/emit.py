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

from .agent import sender as _sender_module
from .agent.outbox import put_emitted as _put
from .agent.probes.step_state import state as _steps  # the step count, without the probe
from .agent.sender import get_sender as _get_sender
from .agent.values import as_number  # noqa: F401 - part of the public surface (tests)
from .records import FACT_KEYS  # noqa: F401 - part of the public surface

TYPE_CHECKING = False  # typing costs ~9 ms at start-up in every Python the run starts
if TYPE_CHECKING:
    from typing import Any

_warned: set[str] = set()
_monotonic = time.monotonic


def emit(**values: Any) -> None:
    """Record named numbers for this run: series such as `train_loss`, or facts such as
    `tokens_per_step`. A no-op outside `tm`."""
    try:
        # the live sender without `get_sender()`'s frame (a call is a third of emit's cost);
        # the first call, and one after the supervisor went, ask it
        sender = _sender_module._sender
        if sender is None or sender.quiet:
            sender = _get_sender()
            if sender is None:
                return
        _put(sender, values, _steps.n_steps, _monotonic(), _skip)
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
