"""A finished run for the dashboard: its log replayed through the same engine as `tm summary`.

`supervisor.replay.replay` feeds every record through the live run's recorder and engine; here
the engine is wrapped so that each fed record also reaches the bounded history, and so that a
snapshot is taken every so often in record time to draw the engine's own numbers (tokens/s,
MFU...) over the run, as the live dashboard saw them about once a second. The final snapshot is
the replay's own, so the page shows the very numbers `tm summary --json` prints.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..history import History

#: At most this many snapshots are taken along the replay (each costs a full engine snapshot).
MAX_SNAPSHOTS = 2000
#: And no more often than this, in seconds of the run (the live loop's pace).
MIN_INTERVAL_S = 1.0


def _span(events: Path) -> float | None:
    """Seconds between the log's first and last record, read from its two ends only."""
    try:
        with open(events, "rb") as fh:
            first = json.loads(fh.readline() or b"null")
            size = os.fstat(fh.fileno()).st_size
            fh.seek(max(0, size - 65536))
            tail = fh.read().splitlines()
        for line in reversed(tail):
            try:
                last = json.loads(line)
                return float(last["t"]) - float(first["t"])
            except (ValueError, KeyError, TypeError):
                continue
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return None


class _HistoryTap:
    """An engine that also hands each record to the history, and samples snapshots on the way."""

    def __init__(self, engine: Any, history: History, interval: float) -> None:
        self._engine = engine
        self._history = history
        self._interval = interval
        self._next: float | None = None

    def feed(self, record: dict[str, Any]) -> Any:
        out = self._engine.feed(record)
        self._history.on_record(record)
        t = record.get("t")
        if isinstance(t, (int, float)) and record.get("kind") in ("step", "sample.gpu"):
            if self._next is None:
                self._next = t + self._interval
            elif t >= self._next:
                self._next = t + self._interval
                self._history.on_snapshot(self._engine.snapshot(now=t), t)
        return out

    def snapshot(self, now: float | None = None) -> dict[str, Any]:
        return self._engine.snapshot(now=now)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)


def replay_with_history(events: Path, history: History | None = None) -> tuple[Any, History]:
    """(the replay's result, the history of the whole run)."""
    from ...supervisor import late_parts
    from ...supervisor.replay import replay
    from ...supervisor.warn import WarnOnce

    history = history if history is not None else History()
    warn = WarnOnce()
    factory, _missing = late_parts.load_engine_factory(warn)
    span = _span(events)
    interval = max(MIN_INTERVAL_S, (span or 0.0) / MAX_SNAPSHOTS)

    def tapped() -> Any:
        if factory is None:
            raise RuntimeError("the engine could not be loaded")
        return _HistoryTap(factory(), history, interval)

    result = replay(events, engine_factory=tapped, warn=warn)
    history.on_snapshot(result.snapshot, None)
    return result, history
