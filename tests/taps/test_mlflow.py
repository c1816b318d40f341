"""The MLflow tap on the real library with a local file store."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

mlflow = pytest.importorskip("mlflow")  # the framework extra; CI installs it
from mlflow.exceptions import MlflowException  # noqa: E402

from trainmeter.agent import taps  # noqa: E402
from trainmeter.agent.taps import mlflow as mlflow_tap  # noqa: E402


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(f"file://{tmp_path}/mlruns")
    yield tmp_path
    mlflow.set_tracking_uri(previous)


def history(run_id: str, key: str) -> list[tuple[int, float]]:
    return [(m.step, m.value) for m in mlflow.MlflowClient().get_metric_history(run_id, key)]


def test_all_three_calls_forwarded_and_recorded_once(store: Path, collector) -> None:
    taps.install_all()
    assert inspect.signature(mlflow.log_metric) == inspect.signature(mlflow.log_metric.__wrapped__)
    with mlflow.start_run() as run:
        mlflow.log_metric("loss", 0.5, step=2)
        mlflow.log_metrics({"loss": 0.25, "lr": 1e-3}, step=3)
        mlflow.MlflowClient().log_metric(run.info.run_id, "loss", 0.125, step=4)
    assert history(run.info.run_id, "loss") == [(2, 0.5), (3, 0.25), (4, 0.125)]
    got = [(m["key"], m["value"], m["via"], m["step"]) for m in collector.metrics()]
    # mlflow.log_metric calls MlflowClient.log_metric inside: still one record for it
    assert got == [
        ("loss", 0.5, "mlflow", 2),
        ("loss", 0.25, "mlflow", 3),
        ("lr", 1e-3, "mlflow", 3),
        ("loss", 0.125, "mlflow", 4),
    ]


def test_tracker_exception_passes_through(store: Path, collector) -> None:
    taps.install_all()
    with pytest.raises(MlflowException, match="Run 'no-such-run' not found"):
        mlflow.log_metric("loss", 1.0, run_id="no-such-run")
    assert mlflow_tap.TAP.enabled


def test_cuda_tensor_skipped_unread_by_the_tap(store: Path, collector, cuda_like) -> None:
    taps.install_all()
    fake = cuda_like()
    with mlflow.start_run():
        mlflow.log_metric("gpu_loss", fake, step=1)  # MLflow itself calls float() on it
        mlflow.log_metric("host_loss", 0.75, step=1)
    assert fake.readers and not fake.read_by_trainmeter()
    assert [m["key"] for m in collector.metrics()] == ["host_loss"]


def test_own_failure_disables_mlflow_tap_alone(store, collector, monkeypatch, capsys) -> None:
    taps.install_all()
    monkeypatch.setattr(mlflow_tap, "arg", lambda *a: {}["missing"])
    with mlflow.start_run() as run:
        mlflow.log_metric("loss", 0.5, step=1)
        mlflow.log_metric("loss", 0.375, step=2)
    assert history(run.info.run_id, "loss") == [(1, 0.5), (2, 0.375)]
    assert capsys.readouterr().err.count("the mlflow tap failed (KeyError") == 1
    assert not mlflow_tap.TAP.enabled
    assert collector.metrics() == []
    from trainmeter.agent.taps import wandb as wandb_tap

    assert wandb_tap.TAP.enabled
