"""Warn once on stderr: a part of trainmeter that fails says so once and the run goes on.

Invariant 1 and 9 mean a failing probe, sampler or disk never stops training nor changes the
exit status; the user still deserves to know, but only once, not once a second.
"""

from __future__ import annotations

import sys

# `threading.Lock` itself, without `threading` (~0.5 ms of every replay's start)
from _thread import allocate_lock


class WarnOnce:
    """Prints `trainmeter: <message>` the first time a key is seen. Thread-safe, never raises."""

    def __init__(self, stream=None) -> None:
        self._stream = stream
        self._seen: set[str] = set()
        self._lock = allocate_lock()

    def __call__(self, key: str, message: str | None = None) -> None:
        with self._lock:
            if key in self._seen:
                return
            self._seen.add(key)
        try:
            stream = self._stream or sys.stderr
            # what a warning quotes (an error, a path, a reason) is shown as characters;
            # imported here, at the first warning: its patterns' compiling is not on the way
            # to the child's start
            from ..visible import visible

            text = visible(message or key, newlines=False)
            stream.write(f"trainmeter: {text}\n")  # one write: never split by the
            stream.flush()  # training's own output on the same terminal
        except Exception:  # noqa: BLE001 - a closed stderr is no reason to stop a run
            pass

    def seen(self, key: str) -> bool:
        return key in self._seen
