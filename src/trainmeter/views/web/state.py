"""What the dashboard serves: the latest snapshot and the bounded history, behind one lock.

The supervisor's threads write (`on_points` for the engine's points, `on_snapshot` about once a
second, `on_finish` once); the server's one loop thread reads. Each snapshot, the end and the
close call the `listeners` (the server's wake-up), so a server-sent-events stream sends when
there is news and no sooner. Everything handed out is already JSON text, built under the lock
from plain data.
"""

from __future__ import annotations

import json
import math
import threading
from typing import Any

from ..history import History


def _finite(obj: Any) -> Any:
    """The same structure with NaN and infinities as None (JSON has no such numbers)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def to_json(obj: Any) -> str:
    try:
        return json.dumps(obj, allow_nan=False, separators=(",", ":"), default=str)
    except ValueError:
        return json.dumps(_finite(obj), allow_nan=False, separators=(",", ":"), default=str)


class DashboardState:
    """The run as the page sees it. `mode` is "live" (a run in progress) or "view" (finished)."""

    def __init__(self, mode: str = "live", run_dir: str | None = None, history: History | None = None):
        self.mode = mode
        self.run_dir = run_dir
        self.history = history if history is not None else History()
        self.snapshot: dict[str, Any] = {}
        self.seq = 0  # grows with each snapshot
        self.finished = False
        self.closed = False  # the server is going away: streams end
        #: grows with every change (a record, a snapshot): what a reader got is named by it
        self.version = 0
        #: called (cheap, never blocking) after each snapshot and at the end: a server's wake-up
        self.listeners: list[Any] = []
        self._lock = threading.Lock()

    # -- writers (the supervisor's threads) --------------------------------------------------

    def on_points(self, points: list[tuple[Any, ...]], origin: float | None) -> None:
        with self._lock:
            self.history.on_points(points, origin)
            self.version += 1

    def on_snapshot(self, snap: dict[str, Any], now: float | None = None) -> None:
        with self._lock:
            self.history.on_snapshot(snap, now)
            self.snapshot = snap
            self.seq += 1
            self.version += 1
        self._tell()

    def on_finish(self, snap: dict[str, Any]) -> None:
        """The final snapshot: shown as is (its numbers are the run's summary)."""
        with self._lock:
            self.snapshot = snap
            self.finished = True
            self.seq += 1
            self.version += 1
        self._tell()

    def close(self) -> None:
        with self._lock:
            self.closed = True
        self._tell()

    def _tell(self) -> None:
        for listener in list(self.listeners):
            try:
                listener()
            except Exception:  # noqa: BLE001 - a reader's wake-up never fails a writer
                pass

    # -- readers (the server's loop) -----------------------------------------------------------

    def message(self, since: dict[str, Any] | None = None) -> tuple[str, dict[str, Any], int]:
        text, marks, seq, _ = self.message_at(since)
        return text, marks, seq

    def message_at(
        self, since: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any], int, int]:
        """(JSON of the state, history marks to pass as `since` next time, its seq, its version).

        Only the copy is made under the lock (the recorder waits on it for every record); the
        JSON, the slow part for a long run, is written outside it. A snapshot is never changed
        once handed over, so it can be read without the lock.
        """
        with self._lock:
            body = {
                "mode": self.mode,
                "run_dir": self.run_dir,
                "seq": self.seq,
                "finished": self.finished,
                "snapshot": self.snapshot,
                "history": self.history.dump(since),
            }
            marks, seq, version = self.history.marks(), self.seq, self.version
        return to_json(body), marks, seq, version
