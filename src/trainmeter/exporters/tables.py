"""A finished run as a table: the loop's series and trainmeter's derived metrics, one row a step.

The log is replayed through the engine; every metric record puts its value in the row of its
step, and at intervals of the run's own clock (a few thousand samples over the whole run at
most) the engine's snapshot puts the derived numbers (tokens/s, MFU, goodput, ...) in the row of
the step it had reached. A cell nobody measured stays empty (None, NaN in pandas), never zero.

`write_csv` needs nothing; `write_parquet` needs pyarrow (the `parquet` extra) and says so when it
is missing. The same rows feed the W&B export and the charts of the HTML report.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Column-name prefix of trainmeter's own numbers, apart from the loop's series.
PREFIX = "trainmeter/"
#: At most this many engine snapshots are taken over a run.
MAX_SAMPLES = 2000
MIN_INTERVAL_S = 0.05

#: derived column -> how to read it from a snapshot
DERIVED: dict[str, Callable[[dict[str, Any]], Any]] = {
    "tokens": lambda s: s.get("tokens_seen"),
    "tokens_per_s": lambda s: s.get("tokens_per_s"),
    "step_time_s": lambda s: s.get("step_time_s"),
    "flops": lambda s: s.get("flops_spent"),
    "mfu": lambda s: _dict(s.get("mfu")).get("value"),
    "ofu": lambda s: _dict(s.get("ofu")).get("value"),
    "goodput": lambda s: _dict(s.get("time")).get("goodput"),
    "progress": lambda s: s.get("progress"),
    "energy_j": lambda s: _dict(s.get("energy")).get("joules"),
    "gpu_util": lambda s: _dict(_dict(s.get("ladder")).get("mean")).get("gpu_util"),
    "sm_active": lambda s: _dict(_dict(s.get("ladder")).get("mean")).get("sm_active"),
    "tensor_active": lambda s: _dict(_dict(s.get("ladder")).get("mean")).get("tensor_active"),
}


class ExportError(Exception):
    """What the user must fix (a missing optional package): one line."""


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


@dataclass
class RunTable:
    """Rows keyed by step; `series` are the loop's names, `derived` trainmeter's (unprefixed)."""

    rows: dict[int, dict[str, Any]] = field(default_factory=dict)
    series: list[str] = field(default_factory=list)
    derived: list[str] = field(default_factory=list)
    snapshot: dict[str, Any] = field(default_factory=dict)

    @property
    def columns(self) -> list[str]:
        return ["step", "time_s", *self.series, *(PREFIX + d for d in self.derived)]

    def records(self) -> list[dict[str, Any]]:
        """One dict a row, in step order, every column present (None where not measured)."""
        cols = self.columns
        out = []
        for step in sorted(self.rows):
            row = self.rows[step]
            out.append({c: row.get(c) for c in cols})
        return out

    def column(self, name: str) -> list[tuple[int, float]]:
        """(step, value) pairs of one column where it has a value."""
        return [(s, r[name]) for s, r in sorted(self.rows.items()) if r.get(name) is not None]


class _SamplingEngine:
    """The real engine, fed as in a replay, with rows taken on the way."""

    def __init__(self, inner: Any, table: RunTable, interval: float, history: Any = None) -> None:
        self.inner = inner
        self.history = history
        self.table = table
        self.interval = interval
        self.t0: float | None = None
        self.step = 0
        self.last_sample: float | None = None
        self._series: set[str] = set()
        self._derived: set[str] = set()

    def _row(self, step: int, t: float) -> dict[str, Any]:
        row = self.table.rows.setdefault(step, {"step": step})
        if self.t0 is not None and "time_s" not in row:
            row["time_s"] = max(t - self.t0, 0.0)  # when the step was first seen
        return row

    def feed(self, record: dict[str, Any]) -> None:
        self.inner.feed(record)
        if self.history is not None:
            self.history.on_record(record)
        kind, d, t = record.get("kind"), record.get("d") or {}, record.get("t", 0.0)
        if kind == "run.start" and self.t0 is None:
            self.t0 = t
        elif kind == "metric" and record.get("rank") in (None, 0):
            value = _finite(d.get("value"))
            key = d.get("key")
            if value is not None and isinstance(key, str) and key:
                step = d.get("step")
                step = int(step) if isinstance(step, int) and not isinstance(step, bool) else self.step
                self._row(step, t)[key] = value
                self._series.add(key)
        elif kind == "step":
            n = d.get("n")
            if isinstance(n, int) and not isinstance(n, bool) and record.get("rank") in (None, 0):
                self.step = max(self.step, n)
            if self.last_sample is None or t - self.last_sample >= self.interval:
                self.sample(t)
        elif kind == "run.end":
            self.sample(t)

    def sample(self, t: float) -> None:
        self.last_sample = t
        snap = self.inner.snapshot(now=t)
        if self.history is not None:
            self.history.on_snapshot(snap, now=t)
        steps = snap.get("steps")
        step = int(steps) if isinstance(steps, (int, float)) and not isinstance(steps, bool) else self.step
        row = self._row(step, t)
        for name, read in DERIVED.items():
            value = _finite(read(snap))
            if value is not None:
                row[PREFIX + name] = value
                self._derived.add(name)

    def snapshot(self, now: float | None = None) -> dict[str, Any]:
        return self.inner.snapshot(now=now)

    def finish(self) -> None:
        self.table.series = sorted(self._series)
        self.table.derived = [d for d in DERIVED if d in self._derived]


def _run_span(events: Path) -> float:
    """Seconds between the log's first and last record (0 when it cannot tell)."""
    try:
        with open(events, "rb") as fh:
            first = json.loads(fh.readline())
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(size - 65536, 0))
            tail = fh.read().splitlines()
        last = next(json.loads(line) for line in reversed(tail) if line.strip().startswith(b"{"))
        return max(float(last["t"]) - float(first["t"]), 0.0)
    except (OSError, ValueError, KeyError, TypeError, StopIteration):
        return 0.0


def run_table(run_dir: Path, history: Any = None) -> RunTable:
    """Replay `run_dir/events.jsonl` into a `RunTable` (raises OSError when it cannot be read).

    `history`: a `views.history.History` to feed on the way (records, and the same snapshots).
    """
    from ..supervisor import late_parts as parts
    from ..supervisor.replay import replay
    from ..supervisor.warn import WarnOnce

    events = Path(run_dir) / "events.jsonl"
    interval = max(_run_span(events) / MAX_SAMPLES, MIN_INTERVAL_S)
    table = RunTable()
    warn = WarnOnce()
    factory, _missing = parts.load_engine_factory(warn)
    holder: list[_SamplingEngine] = []

    def make() -> Any:
        if factory is None:
            raise RuntimeError("the engine could not be loaded")
        engine = _SamplingEngine(factory(), table, interval, history)
        holder.append(engine)
        return engine

    result = replay(events, engine_factory=make, warn=warn)
    for engine in holder:
        engine.finish()
    table.snapshot = result.snapshot
    return table


# ---- writers ------------------------------------------------------------------------------------


#: A cell starting with one of these is a formula to a spreadsheet (OWASP, "CSV injection").
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_text(text: str) -> str:
    """A text cell a spreadsheet shows as text: control characters (NUL too) made visible, and
    a leading formula character defused with a single quote, as OWASP recommends."""
    from ..views.visible import visible

    text = visible(str(text), newlines=False)
    return "'" + text if text.startswith(FORMULA_START) else text


def write_csv(table: RunTable, target: Path | Any) -> None:
    """The table as CSV to `target`, a path or an open text stream (stdout for `-o -`). The
    header is the run's keys, which the training script chose: each is made inert."""
    if not isinstance(target, (str, Path)):
        _write_csv(table, target)
        return
    with open(target, "w", newline="", encoding="utf-8", errors="backslashreplace") as fh:
        _write_csv(table, fh)


def _write_csv(table: RunTable, fh: Any) -> None:
    writer = csv.writer(fh)
    writer.writerow([csv_text(c) for c in table.columns])
    for row in table.records():
        writer.writerow(
            ["" if v is None else repr(v) if isinstance(v, float) else v for v in row.values()]
        )


def write_parquet(table: RunTable, target: Path) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ExportError(
            "Parquet needs pyarrow, which is not installed: pip install 'trainmeter[parquet]'"
            " (or export csv)"
        ) from None
    rows = table.records()
    arrays = {"step": pa.array([r["step"] for r in rows], pa.int64())}
    for col in table.columns[1:]:
        arrays[col] = pa.array([r[col] for r in rows], pa.float64())
    pq.write_table(pa.table(arrays), target)
