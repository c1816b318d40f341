"""The smaller holes of issue 22's "Also" list: a private run directory, a `TMPDIR` too long
for a socket path, and a count of dropped values that says why."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from trainmeter.supervisor import ingest

from ..conftest import read_events, run_dirs, run_tm, tm_env

EMITTER = """
from trainmeter import emit
for step in range(20):
    emit(loss=float(step))
print("done")
"""


def test_the_run_directory_and_its_files_are_the_owners_alone(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text(EMITTER)
    out = run_tm(["-q", "--no-web", "t.py"], tmp_path)
    assert out.returncode == 0, out.stderr
    run = run_dirs(tmp_path)[-1]
    assert stat.S_IMODE(run.stat().st_mode) == 0o700
    for name in ("events.jsonl", "meta.json", "summary.json"):
        assert stat.S_IMODE((run / name).stat().st_mode) & 0o077 == 0, name


def test_a_tmpdir_too_long_for_a_socket_still_gets_the_agent(tmp_path: Path) -> None:
    long_tmp = tmp_path / ("d" * 120)
    long_tmp.mkdir()
    (tmp_path / "t.py").write_text(EMITTER)
    out = run_tm(["-q", "--no-web", "t.py"], tmp_path, env=tm_env(TMPDIR=str(long_tmp)))
    assert out.returncode == 0, out.stderr
    assert "too long" not in out.stderr and "observe only" not in out.stderr, out.stderr
    events = read_events(run_dirs(tmp_path)[-1])
    losses = [e for e in events if e["kind"] == "metric" and e["d"]["key"] == "loss"]
    assert len(losses) == 20


def test_when_no_directory_fits_the_reason_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ingest, "SOCKET_PATH_MAX", 20)
    with pytest.raises(OSError, match="TMPDIR is too long for a Unix socket"):
        ingest.socket_parent("/tmp/" + "d" * 200)


KEYS = """
from trainmeter import emit
for i in range(100_000):
    emit(**{f"key_{i:06d}": 1.0})
print("done")
"""


def test_values_dropped_for_too_many_keys_are_counted_with_the_reason(tmp_path: Path) -> None:
    (tmp_path / "k.py").write_text(KEYS)
    out = run_tm(["-q", "--no-web", "k.py"], tmp_path)
    assert out.returncode == 0, out.stderr
    events = read_events(run_dirs(tmp_path)[-1])
    kept = {e["d"]["key"] for e in events if e["kind"] == "metric"}
    dropped = [e["d"] for e in events if e["kind"] == "fact" and e["d"]["key"] == "agent_dropped_records"]
    assert dropped, "no count"
    last = dropped[-1]
    assert len(kept) + last["value"] == 100_000
    assert "key table" in last.get("note", ""), json.dumps(last)
