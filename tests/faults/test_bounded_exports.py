"""`tm report`, `tm export csv` and `tm export parquet` take the same memory on a long log as on
a short one.

Issue 22 ("Also"): on a 2M-step log `tm report` peaked at 800 MB and `tm export csv` at 1.37 GB,
because both built a table with one dict per step. The report's charts now come from the bounded
history alone, and the export table keeps a few thousand rows in memory, the rest in a temporary
file; Parquet is written a row group at a time. Here the Python heap's peak (tracemalloc, plus
Arrow's own memory pool for Parquet) over a log three times longer stays within a small factor;
before, it grew with the log.
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from trainmeter.exporters.tables import run_table, write_csv, write_parquet
from trainmeter.views.report import build_report


def _write_log(run_dir: Path, steps: int) -> Path:
    """A finished run: per step a step record of 4096 tokens and a loss, 10 steps a second; a GPU
    sample every 2 s, so the derived columns (tokens/s, energy) are there too."""
    run_dir.mkdir()
    lines = []

    def put(t: float, src: str, kind: str, d: dict, rank: int | None = 0) -> None:
        lines.append(json.dumps(
            {"v": 1, "t": round(t, 6), "src": src, "rank": rank, "pid": 100, "kind": kind, "d": d},
            separators=(",", ":"),
        ))

    put(0.0, "tm", "run.start", {"argv": ["python", "train.py"], "name": "long", "declared": {}}, None)
    put(0.5, "agent", "hello", {"world_size": 1, "local_rank": 0, "rank": 0, "probes": ["steps"]})
    for i in range(1, steps + 1):
        t = 1.0 + i * 0.1
        put(t, "agent", "step", {"k": 1, "tokens": 4096, "n": i, "micro": 1})
        put(t, "agent", "metric", {"key": "train_loss", "value": 3.0 / (1 + i / 1000), "step": i})
        if i % 20 == 0:
            gpu = {"index": 0, "uuid": "GPU-0", "name": "NVIDIA H100 80GB HBM3", "gpu_util": 0.9,
                   "window_s": 1.0, "energy_j": 70.0 * i, "power_w": 700.0}
            put(t, "tm", "sample.gpu", {"gpus": [gpu], "selected_by": "all"}, None)
    put(1.0 + steps * 0.1 + 0.5, "tm", "run.end", {"exit_status": 0}, None)
    (run_dir / "events.jsonl").write_text("\n".join(lines) + "\n")
    return run_dir


def _export_csv(run_dir: Path) -> int:
    table = run_table(run_dir)
    write_csv(table, _Discard())
    return len(table.rows)


def _export_parquet(run_dir: Path) -> int:
    table = run_table(run_dir)
    write_parquet(table, run_dir / "export.parquet")  # a file: what is written is not held
    return len(table.rows)


class _Discard:
    """A text stream that counts what is written and keeps none of it (the CSV text itself is
    not the memory under test: a file or stdout would not hold it either)."""

    def __init__(self) -> None:
        self.chars = 0

    def write(self, text: str) -> int:
        self.chars += len(text)
        return len(text)


#: Measures one export in a fresh interpreter: the rows, snapshots and exact step durations kept
#: scaled down with the logs (so the short log already spills, and fills every bound), a first run on a tiny log to take imports and
#: first-use caches out of the measurement, then the heap's peak (tracemalloc) over the work.
_MEASURE = """
import gc, sys, tracemalloc
from pathlib import Path
from trainmeter.engine import rate
from trainmeter.exporters import tables
from tests.faults.test_bounded_exports import WORKS
rate.EXACT_DURATIONS = 200  # the step clock's exact durations, then its histogram
tables.MAX_OPEN_ROWS = 200
tables.MAX_SAMPLES = 200
tables.PARQUET_ROW_GROUP = 200
work = WORKS[sys.argv[1]]
work(Path(sys.argv[2]))
gc.collect()
arrow = sys.modules.get("pyarrow")
before = arrow.default_memory_pool().max_memory() if arrow else 0
tracemalloc.start()
work(Path(sys.argv[3]))
peak = tracemalloc.get_traced_memory()[1]
if arrow:  # Arrow's buffers live outside the Python heap: its pool's peak counts too
    peak += max(0, arrow.default_memory_pool().max_memory() - before)
print(peak)
"""


def _peak(name: str, tiny: Path, run_dir: Path) -> int:
    """The heap's peak of one export, alone in its own process: in the test process the threads
    earlier tests left running allocate too, more the longer the work takes."""
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", _MEASURE, name, str(tiny), str(run_dir)],
        cwd=root, capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return int(out.stdout.split()[-1])


#: The short log already fills what is bounded (the history's 2,048 points a series, the
#: replay's snapshots, the rows kept in memory); the long one is three times longer.
SHORT, LONG = 2_040, 6_120  # the short one just short of the history merging its points


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    base = tmp_path_factory.mktemp("long_logs")
    return (
        _write_log(base / "tiny", 100),
        _write_log(base / "short", SHORT),
        _write_log(base / "long", LONG),
    )


WORKS: dict[str, Callable[[Path], object]] = {
    "export_csv": _export_csv,
    "export_parquet": _export_parquet,
    "report": build_report,
}


@pytest.mark.parametrize("name", sorted(WORKS))
def test_memory_does_not_grow_with_the_log(logs: tuple[Path, Path, Path], name: str) -> None:
    if name == "export_parquet":
        pytest.importorskip("pyarrow")
    tiny, short, long = logs
    small, large = _peak(name, tiny, short), _peak(name, tiny, long)
    # three times the steps: on main the peak grew with them (one dict a step)
    assert large < 1.3 * small, (small, large)  # before: csv 2.35x, report 1.78x, parquet 2.45x


def test_the_csv_of_a_long_log_has_every_step_in_order(
    logs: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainmeter.exporters import tables

    monkeypatch.setattr(tables, "MAX_OPEN_ROWS", 200)
    _, _, long = logs
    out = io.StringIO()
    table = run_table(long)
    write_csv(table, out)
    rows = list(csv.reader(io.StringIO(out.getvalue())))
    assert rows[0][:3] == ["step", "time_s", "train_loss"]
    steps = [int(r[0]) for r in rows[1:]]
    assert steps == list(range(1, LONG + 1))  # far more than the rows kept in memory, none lost
    loss = rows[0].index("train_loss")
    assert [float(r[loss]) for r in rows[1:]] == [3.0 / (1 + i / 1000) for i in steps]
    tokens = rows[0].index("trainmeter/tokens")
    assert float(rows[LONG][tokens]) == 4096.0 * LONG  # the final snapshot's row, read back


def test_row_store_reads_back_a_spilled_row_and_keeps_the_count() -> None:
    from trainmeter.exporters.tables import RowStore

    store = RowStore(max_open=4)
    for step in range(1, 11):
        store.setdefault(step, {"step": step})["a"] = float(step)
    assert len(store.open) <= 4 and len(store) == 10  # the rest went to the database
    late = store.setdefault(2, {"step": 2, "new": True})  # a late record for an old step
    assert "new" not in late and late["a"] == 2.0  # the spilled row, not a fresh one
    late["b"] = 20.0
    store.setdefault(0, {"step": 0})  # a step never seen, below the spilled ones
    assert len(store) == 11
    rows = list(store.items())
    assert [s for s, _ in rows] == list(range(11))
    assert rows[2][1] == {"step": 2, "a": 2.0, "b": 20.0}
    store.close()


def test_the_parquet_of_a_long_log_has_every_step_in_order(
    logs: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    from trainmeter.exporters import tables

    monkeypatch.setattr(tables, "MAX_OPEN_ROWS", 200)
    monkeypatch.setattr(tables, "PARQUET_ROW_GROUP", 500)
    _, _, long = logs
    out = tmp_path / "long.parquet"
    write_parquet(run_table(long), out)
    meta = pq.ParquetFile(out).metadata
    assert meta.num_row_groups == -(-LONG // 500)  # written a group at a time, none held whole
    frame = pq.read_table(out).to_pydict()
    assert frame["step"] == list(range(1, LONG + 1))
    assert frame["train_loss"] == [3.0 / (1 + i / 1000) for i in frame["step"]]
    assert frame["trainmeter/tokens"][-1] == 4096.0 * LONG
