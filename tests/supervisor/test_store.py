"""The run directory: names, the append-only log, JSON files, failure that warns once."""

from __future__ import annotations

import io
import json
from datetime import datetime, timezone
from pathlib import Path

from trainmeter.runlog.store import RunStore, safe_name
from trainmeter.runlog.warn import WarnOnce

WHEN = datetime(2026, 12, 2, 15, 4, 5, tzinfo=timezone.utc)


def test_safe_names() -> None:
    assert safe_name("train") == "train"
    assert safe_name("my run/../../etc") == "my-run-..-..-etc"
    assert safe_name("../..") == "run"
    assert safe_name(".hidden") == "hidden"
    assert safe_name("x" * 100) == "x" * 64


def test_directory_is_utc_time_and_name_and_unique(tmp_path: Path) -> None:
    warn = WarnOnce(io.StringIO())
    a = RunStore.create("gpt 2", warn, root=tmp_path, when=WHEN)
    b = RunStore.create("gpt 2", warn, root=tmp_path, when=WHEN)
    c = RunStore.create("gpt 2", warn, root=tmp_path, when=WHEN)
    assert [s.path.name for s in (a, b, c)] == [
        "20261202-150405-gpt-2", "20261202-150405-gpt-2-2", "20261202-150405-gpt-2-3",
    ]


def test_events_are_appended_and_visible_after_flush(tmp_path: Path) -> None:
    store = RunStore.create("r", WarnOnce(io.StringIO()), root=tmp_path, when=WHEN)
    store.append(b'{"a":1}')
    store.flush()
    assert (store.path / "events.jsonl").read_bytes() == b'{"a":1}\n'
    store.append(b'{"a":2}')
    store.close_events()
    assert (store.path / "events.jsonl").read_bytes() == b'{"a":1}\n{"a":2}\n'


def test_json_files_refuse_nan_and_are_replaced_atomically(tmp_path: Path) -> None:
    stderr = io.StringIO()
    store = RunStore.create("r", WarnOnce(stderr), root=tmp_path, when=WHEN)
    store.write_json("summary.json", {"steps": 3})
    store.write_json("summary.json", {"steps": float("nan")})  # refused, old file kept
    assert json.loads((store.path / "summary.json").read_text()) == {"steps": 3}
    assert "cannot write summary.json" in stderr.getvalue()
    # no temporary file left; `.reserve` is the disk space held for the run's last words
    assert sorted(p.name for p in store.path.iterdir()) == [".reserve", "events.jsonl", "summary.json"]


def test_an_unwritable_root_warns_once_and_every_call_is_a_no_op(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    stderr = io.StringIO()
    store = RunStore.create("r", WarnOnce(stderr), root=blocker / "runs", when=WHEN)
    assert store.path is None and store.broken
    store.append(b"{}")
    store.flush()
    store.write_json("meta.json", {})
    store.close_events()
    assert stderr.getvalue().count("\n") == 1
    assert "cannot write the run log" in stderr.getvalue()


def test_a_write_failure_midway_turns_the_store_off(tmp_path: Path) -> None:
    stderr = io.StringIO()
    store = RunStore.create("r", WarnOnce(stderr), root=tmp_path, when=WHEN)
    store._events.close()  # the disk went away under us
    store.append(b"{}")
    store.append(b"{}")
    store.flush()
    assert store.broken and stderr.getvalue().count("cannot write the run log") == 1
