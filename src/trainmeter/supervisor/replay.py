"""Replaying a run's `events.jsonl` through a fresh engine: `tm summary`, and later `tm view`.

The log is read one line at a time (a file iterator keeps one buffer, never the whole log), so
memory stays flat however long the run was. Lines that do not parse are skipped and counted with
their reason; a log cut short by a crash (no `run.end`, a truncated last line) still replays.
Records go through the same `Recorder` the live run used, with a store that writes nothing, so
the feeding, the error handling and the snapshot are the live run's own (promise 6, docs/promises.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import late_parts as parts
from .ingest import decode_counted
from .recorder import Recorder
from .runs import RunNotFound, resolve_run  # noqa: F401 - re-exported: the one resolver
from .store import RunStore
from .warn import WarnOnce


@dataclass
class ReplayResult:
    snapshot: dict[str, Any]
    lines: int = 0
    records: int = 0
    bad: int = 0
    bad_reasons: dict[str, int] = field(default_factory=dict)
    finished: bool = False  # a run.end record was seen
    feed_errors: int = 0


def replay(
    events: Path,
    engine_factory: Callable[[], Any] | None = None,
    warn: Callable[[str, str], None] | None = None,
) -> ReplayResult:
    """Stream `events` through a fresh engine; return its final snapshot and what was skipped."""
    warn = warn or WarnOnce()
    missing = None
    if engine_factory is None:
        engine_factory, missing = parts.load_engine_factory(warn)
    engine, reason = parts.make_engine(engine_factory, warn)
    recorder = Recorder(RunStore(warn), warn)
    recorder.attach_engine(engine, missing or reason)
    result = ReplayResult(snapshot={})
    with open(events, "rb") as fh:
        for line in fh:
            result.lines += 1
            line = line.strip()
            if not line:
                continue
            record = decode_counted(line, result.bad_reasons)
            if record is None:
                result.bad += 1
                continue
            result.records += 1
            if record["kind"] == "run.end":
                result.finished = True
            recorder.accept(line, record)
    result.feed_errors = recorder.feed_errors
    result.snapshot = recorder.snapshot(now=None)
    return result
