"""The buffer named values wait in until the sender thread ships them: `emit()` and the taps.

Both are called on the training thread, once per logged value, so they only append a tuple here;
the sender thread turns the buffer into `metric` (or, for a fact key passed to `emit`, `fact`)
records when it drains. No JSON and no datagram per value, and no value lost to a full socket.
"""

from __future__ import annotations

import time

from .sender import get_sender

#: Keys that `emit()` takes as facts about the run rather than as series.
FACT_KEYS = frozenset({"tokens_per_step"})

_pending: list[tuple[str, float, str, int | None, float]] = []
_drain_registered_for: object = None


def put(key: str, value: float, via: str, step: int | None, t: float | None = None) -> None:
    """Queue one value (`via` is `emit` or a tap's name). A no-op outside `tm`."""
    global _drain_registered_for
    sender = get_sender()
    if sender is None:
        return  # outside tm, or the supervisor is gone: nothing to tell
    if _drain_registered_for is not sender:
        _drain_registered_for = sender
        sender.add_drain(_drain)
    _pending.append((key, value, via, step, time.monotonic() if t is None else t))


def _drain() -> None:
    """Called by the sender thread: turn the queued values into records, in order."""
    sender = get_sender()
    if sender is None or not _pending:
        return
    batch = _pending[:]
    del _pending[: len(batch)]  # appends made meanwhile stay for the next drain
    for key, value, via, step, t in batch:
        if via == "emit":
            if key in FACT_KEYS:
                sender.send("fact", {"key": key, "value": value, "source": "emitted"}, "emit", t)
                continue
            src = "emit"
        else:
            src = "agent"
        d: dict[str, object] = {"key": key, "value": value, "via": via}
        if step is not None:
            d["step"] = step
        sender.send("metric", d, src, t)


def clear() -> None:
    """Forget what is queued (tests)."""
    _pending.clear()
