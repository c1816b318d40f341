"""A checkpoint of the live engine while the run goes: a run opens at once whatever killed `tm`.

`tm` used to save its engine beside the log only at the end of the run, so a `tm` killed with
SIGKILL (or a node that crashed) left none, and the first look at a long run replayed all of
it. The live loop now saves one every `CHECKPOINT_EVERY_B` bytes of log or `CHECKPOINT_EVERY_S`
seconds, whichever comes first, once the log holds `CHECKPOINT_FROM_B` (a shorter log replays
in a blink): the first look replays at most that much of the tail (`runlog/replay.py`,
`save_live`; the checkpoint covers exactly the bytes the recorder hashed as it wrote them).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

#: The log's size before which no checkpoint is taken: it replays in a fraction of a second.
CHECKPOINT_FROM_B = 1 << 20
#: At most this much log, or this many seconds of the run, between two live checkpoints.
CHECKPOINT_EVERY_B = 4 << 20
CHECKPOINT_EVERY_S = 30.0


class LiveCheckpoints:
    """Called by the live loop at each tick; saves a checkpoint when one is due."""

    def __init__(self, recorder: Any, clock: Callable[[], float] = time.monotonic) -> None:
        self.recorder = recorder
        self.clock = clock
        self.saved_b = 0  # the log's size at the last checkpoint
        self.saved_t = clock()
        self.saved = 0  # checkpoints written

    def due(self) -> bool:
        size = self.recorder.log_bytes
        if size < CHECKPOINT_FROM_B or size == self.saved_b:
            return False
        return (
            size - self.saved_b >= CHECKPOINT_EVERY_B
            or self.clock() - self.saved_t >= CHECKPOINT_EVERY_S
        )

    def tick(self) -> bool:
        """Save a checkpoint if one is due; True when one was written."""
        store = self.recorder.store
        if store.path is None or not self.due():
            return False
        self.saved_b, self.saved_t = self.recorder.log_bytes, self.clock()
        from .replay import save_live  # the replay's modules, once a checkpoint is due

        if save_live(store.path / "events.jsonl", self.recorder):
            self.saved += 1
            return True
        return False
