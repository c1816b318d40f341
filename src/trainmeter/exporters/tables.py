"""A finished run as a table: the loop's series and trainmeter's derived metrics, one row a step.

The log is replayed through the engine; every value the engine takes (the loop's series, by its
one rank rule) goes in the row of its step, and at intervals of the run's own clock (a few thousand samples over the whole run at
most) the engine's snapshot puts the derived numbers (tokens/s, MFU, goodput, ...) in the row of
the step it had reached. A cell nobody measured stays empty (None, NaN in pandas), never zero.

`write_csv` needs nothing; `write_parquet` needs pyarrow (the `parquet` extra) and says so when it
is missing. The same rows feed the W&B export. Rows past the latest few thousand wait in a
temporary file (`RowStore`), and both formats are written as the rows are read (Parquet a row
group at a time), so exporting a long run takes the same memory as a short one.
"""

from __future__ import annotations

import csv
import marshal
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from ..plain import Plain
from ..snapread import get_number

#: Column-name prefix of trainmeter's own numbers, apart from the loop's series.
PREFIX = "trainmeter/"
#: At most this many engine snapshots are taken over a run.
MAX_SAMPLES = 2000
MIN_INTERVAL_S = 0.05

#: derived column -> where it is in a snapshot (`snapread.get`'s dotted path)
DERIVED: dict[str, str] = {
    "tokens": "tokens_seen",
    "tokens_per_s": "tokens_per_s",
    "step_time_s": "step_time_s",
    "flops": "flops_spent",
    "mfu": "mfu.value",
    "ofu": "ofu.value",
    "goodput": "time.goodput",
    "progress": "progress",
    "energy_j": "energy.joules",
    "gpu_util": "ladder.mean.gpu_util",
    "sm_active": "ladder.mean.sm_active",
    "tensor_active": "ladder.mean.tensor_active",
    # the highest over ranks: what decides whether the next step fits
    "memory_reserved_peak_b": "memory.reserved_peak_b",
    "memory_allocated_peak_b": "memory.allocated_peak_b",
    "memory_rss_peak_b": "memory.rss_peak_b",
    "memory_alloc_retries": "memory.alloc_retries",
}


class ExportError(Exception):
    """What the user must fix (a missing optional package): one line."""



#: Rows kept in memory while a table is built; older ones go to a temporary SQLite file.
MAX_OPEN_ROWS = 4096
PARQUET_ROW_GROUP = 8192  # rows in one Parquet row group: the rows a Parquet export holds


class RowStore:
    """Rows by step in bounded memory: the latest `max_open` steps as dicts, the older ones in a
    private temporary SQLite database (on disk, deleted when closed; SQLite's page cache is a
    couple of MB). A log is mostly in step order, so a row evicted is rarely touched again; one
    that is (a late metric, a snapshot's row) is read back and kept open again. A table of every
    step in memory cost 1.37 GB on a 2M-step log; this keeps it flat."""

    def __init__(self, max_open: int | None = None) -> None:
        self.max_open = max(max_open or MAX_OPEN_ROWS, 1)
        self.open: dict[int, dict[str, Any]] = {}
        self._db: Any = None
        self._spilled_max: int | None = None  # the highest step ever written to the database
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def setdefault(self, step: int, default: dict[str, Any]) -> dict[str, Any]:
        """The row of `step` (read back if it was spilled), or `default` as its new row. The
        row stays in memory until the next call, so the caller may fill it in."""
        row = self.open.get(step)
        if row is not None:
            return row
        if self._spilled_max is not None and step <= self._spilled_max:
            row = self._take(step)
        if row is None:
            row = default
            self._count += 1
        if len(self.open) >= self.max_open:  # before adding: the row returned is never spilled
            self._spill(len(self.open) // 2 or 1)
        self.open[step] = row
        return row

    def items(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """(step, row) in step order, each row once."""
        if self._db is None:
            for step in sorted(self.open):
                yield step, self.open[step]
            return
        self._spill(len(self.open))
        for step, blob in self._db.execute("SELECT step, row FROM rows ORDER BY step"):
            yield step, marshal.loads(blob)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def _connect(self) -> Any:
        import sqlite3

        db = sqlite3.connect("", isolation_level=None)  # "": a private temporary file
        db.execute("PRAGMA journal_mode=OFF")
        db.execute("PRAGMA synchronous=OFF")
        db.execute("CREATE TABLE rows (step INTEGER PRIMARY KEY, row BLOB NOT NULL)")
        return db

    def _spill(self, n: int) -> None:
        """Move the `n` lowest open steps to the database."""
        if n <= 0:
            return
        if self._db is None:
            try:
                self._db = self._connect()
            except ImportError:  # a Python built without sqlite3: hold every row, as before
                self.max_open = 1 << 62
                return
        steps = sorted(self.open)[:n]
        self._db.execute("BEGIN")
        self._db.executemany(
            "INSERT OR REPLACE INTO rows VALUES (?, ?)",
            ((step, marshal.dumps(self.open.pop(step))) for step in steps),
        )
        self._db.execute("COMMIT")
        top = steps[-1]
        if self._spilled_max is None or top > self._spilled_max:
            self._spilled_max = top

    def _take(self, step: int) -> dict[str, Any] | None:
        got = self._db.execute("SELECT row FROM rows WHERE step = ?", (step,)).fetchone()
        if got is None:
            return None
        self._db.execute("DELETE FROM rows WHERE step = ?", (step,))
        return marshal.loads(got[0])


class RunTable(Plain):
    """Rows keyed by step; `series` are the loop's names, `derived` trainmeter's (unprefixed).
    A plain class, as the dataclass it replaces was: `dataclasses` imports `inspect` (~8 ms of
    an export's start; see `plain.py`)."""

    def __init__(
        self,
        rows: RowStore | None = None,
        series: list[str] | None = None,
        derived: list[str] | None = None,
        snapshot: dict[str, Any] | None = None,
    ) -> None:
        self.rows = RowStore() if rows is None else rows
        self.series: list[str] = [] if series is None else series
        self.derived: list[str] = [] if derived is None else derived
        self.snapshot: dict[str, Any] = {} if snapshot is None else snapshot


    @property
    def columns(self) -> list[str]:
        return ["step", "time_s", *self.series, *(PREFIX + d for d in self.derived)]

    def records(self) -> Iterator[dict[str, Any]]:
        """One dict a row, in step order, every column present (None where not measured);
        produced as they are read, so writing them out keeps the memory flat."""
        cols = self.columns
        for _, row in self.rows.items():
            yield {c: row.get(c) for c in cols}

    def column(self, name: str) -> list[tuple[int, float]]:
        """(step, value) pairs of one column where it has a value."""
        return [(s, r[name]) for s, r in self.rows.items() if r.get(name) is not None]


class TableObserver:
    """An observer of the replay (`runlog.replay`): each value the engine took (its points, by
    the engine's one rank rule: a key from the lowest rank that logs it) goes in the row of its
    step; each snapshot the replay takes, and the final one, put the derived numbers in the row
    of the step the engine had reached."""

    name = "table"

    def __init__(self, table: RunTable) -> None:
        self.table = table
        self.t0: float | None = None  # the run's start, in record time
        self.step = 0  # the step of the latest value
        self._series: set[str] = set()
        self._derived: set[str] = set()
        self._last_time = 0.0  # seconds since the start of the latest point or snapshot

    def _row(self, step: int, time_s: float) -> dict[str, Any]:
        row = self.table.rows.setdefault(step, {"step": step})
        if "time_s" not in row:
            row["time_s"] = max(time_s, 0.0)  # when the step was first seen
        return row

    def on_points(self, points: list[tuple[Any, ...]], origin: float | None) -> None:
        if origin is not None:
            self.t0 = origin
        series = self._series
        for key, step, value, time_s, _tokens in points:
            self._row(step, time_s)[key] = value
            series.add(key)
            self.step = step
            self._last_time = time_s

    def on_snapshot(self, snap: dict[str, Any], now: float | None) -> None:
        steps = snap.get("steps")
        step = int(steps) if isinstance(steps, (int, float)) and not isinstance(steps, bool) else self.step
        if now is not None and self.t0 is not None:
            self._last_time = now - self.t0
        elif now is None:  # the final snapshot: the run's whole length
            elapsed = get_number(snap, "time.elapsed_s")
            if elapsed is not None:
                self._last_time = elapsed
        row = self._row(step, self._last_time)
        for name, path in DERIVED.items():
            value = get_number(snap, path)
            if value is not None:
                row[PREFIX + name] = value
                self._derived.add(name)

    def on_finish(self, snap: dict[str, Any]) -> None:
        self.on_snapshot(snap, None)
        self.table.series = sorted(self._series)
        self.table.derived = [d for d in DERIVED if d in self._derived]
        self.table.snapshot = snap


def run_table(run_dir: Path, history: Any = None) -> RunTable:
    """Replay `run_dir/events.jsonl` into a `RunTable` (raises OSError when it cannot be read).

    `history`: a `views.history.History`, fed by the same replay (records, the same snapshots).
    """
    from ..runlog.replay import replay

    table = RunTable()
    observers: list[Any] = [TableObserver(table)]
    if history is not None:
        observers.append(history)
    result = replay(
        Path(run_dir) / "events.jsonl",
        observers=observers,
        max_snapshots=MAX_SAMPLES,
        min_interval_s=MIN_INTERVAL_S,
    )
    if history is not None:
        history.on_snapshot(result.snapshot, None)  # the final numbers, as `tm view` draws them
    return table


# ---- writers ------------------------------------------------------------------------------------


#: A cell starting with one of these is a formula to a spreadsheet (OWASP, "CSV injection").
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_text(text: str) -> str:
    """A text cell a spreadsheet shows as text: control characters (NUL too) made visible, and
    a leading formula character defused with a single quote, as OWASP recommends."""
    from ..visible import visible

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


def write_parquet(table: RunTable, target: Path | BinaryIO) -> None:
    """The table as Parquet into a file, or a binary stream (stdout for `-o -`)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ExportError(
            "Parquet needs pyarrow, which is not installed: pip install 'trainmeter[parquet]'"
            " (or export csv)"
        ) from None
    columns = table.columns
    schema = pa.schema(
        [pa.field("step", pa.int64())] + [pa.field(c, pa.float64()) for c in columns[1:]]
    )
    # Written a row group at a time, as the rows are read: memory stays flat however long the
    # run (the whole table at once took one Python dict a step, then the arrays on top)
    with pq.ParquetWriter(target, schema) as writer:
        batch: list[dict[str, Any]] = []
        for row in table.records():
            batch.append(row)
            if len(batch) >= PARQUET_ROW_GROUP:
                writer.write_batch(pa.RecordBatch.from_pylist(batch, schema=schema))
                batch.clear()
        if batch or not len(table.rows):
            writer.write_batch(pa.RecordBatch.from_pylist(batch, schema=schema))
