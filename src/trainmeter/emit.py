"""`emit(...)`: the one optional line a training loop can add.

    from trainmeter import emit
    emit(train_loss=loss.item())

Outside `tm` it does nothing. Inside, it appends the values to a buffer that the agent's sender
thread ships with the step records, so a call costs about a dict update and no value is lost to
a per-call datagram. It returns None, never raises, and never converts a tensor that lives on an
accelerator: numbers and 0-dimensional CPU tensors only (a tensor that requires grad is read
through `detach()` so autograd is left alone). Keys in `FACT_KEYS` are facts about the run, not
series.
"""

from __future__ import annotations

import sys
import time

from .agent import outbox
from .agent.outbox import FACT_KEYS  # noqa: F401 - part of the public surface
from .agent.sender import get_sender
from .agent.state import STATE
from .agent.values import as_number

TYPE_CHECKING = False  # typing costs ~9 ms at start-up in every Python the run starts
if TYPE_CHECKING:
    from typing import Any

_warned: set[str] = set()


def emit(**values: Any) -> None:
    """Record named numbers for this run: series such as `train_loss`, or facts such as
    `tokens_per_step`. A no-op outside `tm`."""
    try:
        if get_sender() is None:
            return
        t = time.monotonic()
        step = STATE.step
        for key, value in values.items():
            number = as_number(value)
            if number is None:
                if key not in _warned:
                    _warned.add(key)
                    print(
                        f"trainmeter: emit({key}=...) skipped: not a finite number on the host",
                        file=sys.stderr,
                    )
                continue
            outbox.put(key, number, "emit", step, t)
    except Exception:  # noqa: BLE001 - promise 1: never raise into the training loop
        return
