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
from .decode import Decoder, log_summary
from .recorder import EngineLike, Recorder
from .store import RunStore, runs_root
from .warn import WarnOnce

_STAMP_LEN = len("YYYYmmdd-HHMMSS-")


class RunNotFound(LookupError):
    """No run directory matches what the user asked for. The message says what was looked at."""


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
    engine_factory: Callable[[], EngineLike] | None = None,
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
    decoder = Decoder()
    with open(events, "rb") as fh:
        for line, record in decoder.lines_of(_counted(fh, result)):
            recorder.accept(line, record)
    result.records = decoder.good
    result.bad = decoder.skipped
    result.bad_reasons = dict(decoder.reasons)
    result.finished = decoder.ended
    result.feed_errors = recorder.feed_errors
    result.snapshot = recorder.snapshot(now=None)
    result.snapshot["log"] = log_summary(result.lines, decoder.good, decoder.reasons)
    return result


def _counted(fh: Any, result: ReplayResult) -> Any:
    """The file's lines, counted as they are read (blank ones too)."""
    for line in fh:
        result.lines += 1
        yield line


def resolve_run(spec: str | None, cwd: Path | None = None) -> Path:
    """A run directory from a path, a name or prefix under .trainmeter/runs, or the latest."""
    if spec:
        path = Path(spec)
        if path.is_file():
            return path.parent
        if path.is_dir() and (path / "events.jsonl").exists():
            return path
    root = runs_root(cwd)
    runs = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    if not runs:
        raise RunNotFound(f"no runs under {root}")
    if not spec:
        return runs[-1]
    for test in (
        lambda n: n == spec,
        lambda n: n.startswith(spec),
        lambda n: n[_STAMP_LEN:] == spec,
        lambda n: n[_STAMP_LEN:].startswith(spec),
    ):
        matches = [p for p in runs if test(p.name)]
        if matches:
            return matches[-1]
    raise RunNotFound(f"no run matches {spec!r} under {root}")
