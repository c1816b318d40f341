"""A plain torch loop logging to wandb (offline), TensorBoard or MLflow, under the real `tm`:
the loss arrives as `train_loss`, tapped, and the run is bit-identical to one without tm."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..conftest import latest_summary, read_events, run_dirs, tm_env
from .conftest import metric_records, run_pair

pytestmark = pytest.mark.slow

KEYS = {"wandb": "train/loss", "tensorboard": "train/loss", "mlflow": "train_loss"}
MODULES = {"wandb": "wandb", "tensorboard": "tensorboard", "mlflow": "mlflow"}


@pytest.mark.parametrize("tracker", ["wandb", "tensorboard", "mlflow"])
def test_tracker_loop(workdir: Path, tracker: str) -> None:
    pytest.importorskip(MODULES[tracker])
    env = tm_env(WANDB_SILENT="true", WANDB_MODE="offline", MLFLOW_ALLOW_FILE_STORE="true")
    ran, under = run_pair(workdir, "tracker_loop.py", [tracker], ["--no-web"], env)
    plain = ran.check().answer
    under.check()
    assert under.answer["losses"] == plain["losses"]
    assert under.answer["weights"] == plain["weights"]

    loss = latest_summary(workdir)["series"]["train_loss"]
    assert (loss["source"], loss["via"], loss["key"], loss["count"]) == (
        "tapped",
        tracker,
        KEYS[tracker],
        6,
    )
    metrics = metric_records(run_dirs(workdir)[-1])
    assert [(m["step"], float(m["value"]).hex()) for m in metrics] == list(
        enumerate(plain["losses"])
    )


def test_no_tap_leaves_the_tracker_alone(workdir: Path) -> None:
    """`tm --no-tap`: the loop runs the same, and no tapped value reaches the log."""
    pytest.importorskip("tensorboard")
    ran, under = run_pair(workdir, "tracker_loop.py", ["tensorboard"], ["--no-web", "--no-tap"])
    plain = ran.check().answer
    assert under.check().answer == plain
    run_dir = run_dirs(workdir)[-1]
    assert metric_records(run_dir) == []
    assert "train_loss" not in latest_summary(workdir)["series"]
    hellos = [r["d"] for r in read_events(run_dir) if r["kind"] == "hello"]
    assert hellos and all("tensorboard" not in h["probes"] for h in hellos)
