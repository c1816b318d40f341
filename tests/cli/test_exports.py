"""Exports of a real run: CSV and Parquet read back in pandas with the loop's own values, and a
W&B run written offline whose history holds the loss values."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import pytest

from ..conftest import read_events, tm_env
from .conftest import STEPS, ExampleRun, tm_cli

pytestmark = pytest.mark.slow
pd = pytest.importorskip("pandas")  # the test extra


def _logged_losses(run: ExampleRun) -> dict[int, float]:
    return {
        r["d"]["step"]: r["d"]["value"]
        for r in read_events(run.run_dir)
        if r["kind"] == "metric" and r["d"]["key"] == "train_loss"
    }


def _check_frame(frame, run: ExampleRun) -> None:
    losses = _logged_losses(run)
    assert len(losses) == STEPS
    got = frame.dropna(subset=["train_loss"]).set_index("step")["train_loss"].to_dict()
    assert got == losses  # exact: every float written at full precision
    assert [float.fromhex(h) for h in run.truth["losses"]] == [losses[s] for s in sorted(losses)]
    last = frame.iloc[-1]
    snap = run.summary
    assert last["step"] == snap["steps"] == STEPS
    assert last["trainmeter/tokens"] == snap["tokens_seen"]
    assert last["trainmeter/tokens_per_s"] == pytest.approx(snap["tokens_per_s"])
    assert last["trainmeter/mfu"] == pytest.approx(snap["mfu"]["value"])
    assert frame["time_s"].is_monotonic_increasing
    # a cell nobody measured is empty, not zero: step 2 has a loss but no derived sample
    assert frame["trainmeter/tokens_per_s"].isna().any()


def test_csv_reads_back_in_pandas(example_run: ExampleRun, tmp_path: Path) -> None:
    out = tmp_path / "run.csv"
    result = tm_cli(["export", "csv", "passported", "-o", str(out)], cwd=example_run.cwd)
    assert result.returncode == 0, result.stderr
    frame = pd.read_csv(out)
    assert list(frame.columns[:3]) == ["step", "time_s", "train_loss"]
    _check_frame(frame, example_run)


def test_parquet_reads_back_in_pandas(example_run: ExampleRun, tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    out = tmp_path / "run.parquet"
    result = tm_cli(["export", "parquet", "-o", str(out)], cwd=example_run.cwd)
    assert result.returncode == 0, result.stderr
    frame = pd.read_parquet(out)
    assert str(frame["step"].dtype) == "int64"
    _check_frame(frame, example_run)


def test_parquet_to_stdout_reads_back(example_run: ExampleRun, tmp_path: Path) -> None:
    """`-o -` writes the Parquet bytes to stdout (not a file named `-`), the count to stderr."""
    import io
    import subprocess
    import sys

    pytest.importorskip("pyarrow")
    result = subprocess.run(
        [sys.executable, "-m", "trainmeter", "export", "parquet", "-o", "-"],
        cwd=example_run.cwd, env=tm_env(), capture_output=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr.decode()
    assert not (example_run.cwd / "-").exists()
    assert result.stdout[:4] == b"PAR1"
    assert b"-> stdout" in result.stderr
    frame = pd.read_parquet(io.BytesIO(result.stdout))
    _check_frame(frame, example_run)


def test_parquet_without_pyarrow_says_how(example_run: ExampleRun, tmp_path: Path) -> None:
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "pyarrow.py").write_text("raise ImportError('no pyarrow here')\n")
    env = tm_env(PYTHONPATH=str(blocker))
    result = tm_cli(["export", "parquet", "-o", str(tmp_path / "x.parquet")], cwd=example_run.cwd,
                    env=env)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "pip install 'trainmeter[parquet]'" in result.stderr
    assert not (tmp_path / "x.parquet").exists()


# ---- W&B ------------------------------------------------------------------------------------


def _leveldb_records(data: bytes) -> list[bytes]:
    """The records of a W&B run file: a 7-byte header, then 32 KiB blocks of chunks, each chunk
    crc32 (4) + length (2) + type (1: full, 2: first, 3: middle, 4: last). The checksums are
    not checked: a damaged file would fail to parse as protobuf, or miss values, and fail."""
    assert data[:4] == b":W&B"
    out, pending, pos, block = [], b"", 7, 32768
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunk = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind == 0 and length == 0:
            continue
        if kind in (1, 2):
            pending = chunk
        else:
            pending += chunk
        if kind in (1, 4):
            out.append(pending)
            pending = b""
    return out


def test_wandb_offline_history_holds_the_losses(example_run: ExampleRun, tmp_path: Path) -> None:
    pytest.importorskip("wandb")
    from wandb.proto import wandb_internal_pb2 as pb

    env = tm_env(WANDB_MODE="offline", WANDB_DIR=str(tmp_path), WANDB_SILENT="true")
    result = tm_cli(["export", "wandb", "passported", "--project", "tm-test"], cwd=example_run.cwd,
                    env=env)
    assert result.returncode == 0, result.stderr
    (path,) = tmp_path.glob("wandb/offline-run-*/run-*.wandb")
    history: dict[int, dict[str, float]] = {}
    config, summary = {}, {}
    for raw in _leveldb_records(path.read_bytes()):
        record = pb.Record()
        record.ParseFromString(raw)
        which = record.WhichOneof("record_type")
        if which == "history":
            row = {i.key or "/".join(i.nested_key): json.loads(i.value_json)
                   for i in record.history.item}
            history[int(row["_step"])] = row
        elif which == "run":
            config.update({i.key: json.loads(i.value_json) for i in record.run.config.update})
        elif which == "summary":
            summary.update({i.key or "/".join(i.nested_key): json.loads(i.value_json)
                            for i in record.summary.update})
    losses = _logged_losses(example_run)
    assert {s: r["train_loss"] for s, r in history.items() if "train_loss" in r} == losses
    last = history[STEPS]
    assert last["trainmeter/tokens"] == example_run.summary["tokens_seen"]
    assert math.isclose(last["trainmeter/mfu"], example_run.summary["mfu"]["value"])
    passport = json.loads((example_run.run_dir / "passport.json").read_text())
    assert config["trainmeter"]["training"] == passport["training"]
    assert summary["trainmeter/steps"] == STEPS
    assert summary["train_loss"] == losses[STEPS]
