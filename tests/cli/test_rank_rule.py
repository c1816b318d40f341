"""One rank rule everywhere: a real two-rank pipeline (torchrun, gloo) whose loss exists on rank 1
only. The engine takes each key from the lowest rank that logs it; the summary, the dashboard's
history and every export (CSV, Parquet, W&B offline) read the engine's points, so all of them
hold rank 1's loss (the CSV export once took rank 0 alone and had no loss column)."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from ..conftest import run_dirs, run_tm, tm_env
from .conftest import SCRIPTS, sys
from .test_exports import _leveldb_records

pytestmark = pytest.mark.slow
pd = pytest.importorskip("pandas")
STEPS = 12


class PipelineRun:
    def __init__(self, cwd: Path, stdout: str) -> None:
        self.cwd = cwd
        (self.run_dir,) = run_dirs(cwd)
        # the losses rank 1 printed, exactly (float.hex), in step order
        self.losses = [float.fromhex(line.split()[1]) for line in stdout.splitlines()
                       if line.startswith("LOSS ")]
        self.summary = json.loads((self.run_dir / "summary.json").read_text())


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> PipelineRun:
    cwd = tmp_path_factory.mktemp("pipeline")
    result = run_tm(
        ["--quiet", "--no-web", "--", sys.executable, "-m", "torch.distributed.run", "--standalone",
         "--nproc_per_node=2", str(SCRIPTS / "pipeline_loss.py")],
        cwd=cwd, env=tm_env(OMP_NUM_THREADS="1", STEPS=str(STEPS)), timeout=300,
    )
    assert result.returncode == 0, result.stderr
    run = PipelineRun(cwd, result.stdout)
    assert len(run.losses) == STEPS
    events = [json.loads(line) for line in (run.run_dir / "events.jsonl").read_text().splitlines()]
    assert {e["rank"] for e in events if e["kind"] == "metric"} == {1}  # the premise
    return run


def test_the_summary_shows_rank_1s_loss(pipeline: PipelineRun) -> None:
    loss = pipeline.summary["series"]["train_loss"]
    assert (loss["rank"], loss["count"], loss["value"]) == (1, STEPS, pipeline.losses[-1])
    text = run_tm(["summary", str(pipeline.run_dir)], cwd=pipeline.cwd).stdout
    assert f"train_loss  {pipeline.losses[-1]:.4g}  {STEPS} values" in text


def test_the_dashboards_history_draws_it(pipeline: PipelineRun, capsys) -> None:
    from trainmeter.cli import view

    stop = threading.Event()
    thread = threading.Thread(target=view.main, args=([str(pipeline.run_dir), "--port", "0"], stop))
    thread.start()
    try:
        url, deadline = None, time.monotonic() + 60
        while url is None and time.monotonic() < deadline:
            err = capsys.readouterr().err
            url = err.split(" at ")[1].split(" ")[0] if "http://" in err else None
            stop.wait(0.05)
        assert url, "tm view printed no address"
        with urllib.request.urlopen(url + "api/state", timeout=10) as resp:
            state = json.loads(resp.read())
    finally:
        stop.set()
        thread.join(30)
    loss = state["history"]["series"]["train_loss"]
    assert loss["last"] == pipeline.losses and loss["step"] == list(range(1, STEPS + 1))


def _check(frame, run: PipelineRun) -> None:
    got = frame.dropna(subset=["train_loss"]).set_index("step")["train_loss"].to_dict()
    assert got == dict(enumerate(run.losses, start=1))  # every value, exactly, at its step


def test_csv_has_the_loss(pipeline: PipelineRun, tmp_path: Path) -> None:
    out = tmp_path / "run.csv"
    result = run_tm(["export", "csv", str(pipeline.run_dir), "-o", str(out)], cwd=pipeline.cwd)
    assert result.returncode == 0, result.stderr
    _check(pd.read_csv(out), pipeline)


def test_parquet_has_the_loss(pipeline: PipelineRun, tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    out = tmp_path / "run.parquet"
    result = run_tm(["export", "parquet", str(pipeline.run_dir), "-o", str(out)], cwd=pipeline.cwd)
    assert result.returncode == 0, result.stderr
    _check(pd.read_parquet(out), pipeline)


def test_wandb_offline_has_the_loss(pipeline: PipelineRun, tmp_path: Path) -> None:
    pytest.importorskip("wandb")
    from wandb.proto import wandb_internal_pb2 as pb

    env = tm_env(WANDB_MODE="offline", WANDB_DIR=str(tmp_path), WANDB_SILENT="true")
    result = run_tm(["export", "wandb", str(pipeline.run_dir), "--project", "tm-test"],
                    cwd=pipeline.cwd, env=env)
    assert result.returncode == 0, result.stderr
    (path,) = tmp_path.glob("wandb/offline-run-*/run-*.wandb")
    history = {}
    for raw in _leveldb_records(path.read_bytes()):
        record = pb.Record()
        record.ParseFromString(raw)
        if record.WhichOneof("record_type") == "history":
            row = {i.key or "/".join(i.nested_key): json.loads(i.value_json)
                   for i in record.history.item}
            if "train_loss" in row:
                history[int(row["_step"])] = row["train_loss"]
    assert history == dict(enumerate(pipeline.losses, start=1))
