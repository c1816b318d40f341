"""The wandb tap on the real library, offline (no network, no account)."""

from __future__ import annotations

import inspect
import time
from pathlib import Path

import pytest

wandb = pytest.importorskip("wandb")  # the framework extra; CI installs it
from wandb.sdk.wandb_run import Run  # noqa: E402

from trainmeter.agent import taps  # noqa: E402
from trainmeter.agent.taps import wandb as wandb_tap  # noqa: E402


@pytest.fixture
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    return tmp_path


def run_file(directory: Path, *expected: bytes) -> bytes:
    """The offline run's own log, once wandb's service has written what the test expects.

    `run.finish()` can return before the service process has flushed (it is shared by the runs
    of one process); `wandb.teardown()` stops it, and a short wait covers the rest."""
    wandb.teardown()
    (path,) = directory.glob("wandb/offline-run-*/run-*.wandb")
    deadline = time.monotonic() + 60
    while True:
        data = path.read_bytes()
        if all(value in data for value in expected) or time.monotonic() > deadline:
            return data
        time.sleep(0.1)


def test_run_log_and_wandb_log_forwarded_and_recorded(offline: Path, collector, cuda_like):
    taps.install_all()
    assert inspect.signature(Run.log) == inspect.signature(Run.log.__wrapped__)
    fake = cuda_like()
    run = wandb.init(project="tm-tap", dir=str(offline))
    wandb.log({"train/loss": 0.0987654321})  # the module function goes through Run.log too
    returned = run.log({"train/loss": 0.123456789, "lr": 3e-4, "note": "text"}, step=5)
    with pytest.raises(TypeError):  # wandb cannot serialize the fake; its error, not ours
        run.log({"gpu_loss": fake, "host_loss": 2.5}, step=6)
    run.log({"train/loss": 0.0555555555}, step=7)
    run.finish()
    assert returned is None
    data = run_file(offline, b"0.0987654321", b"0.123456789", b"0.0555555555")
    for value in (b"0.0987654321", b"0.123456789", b"0.0555555555"):
        assert value in data  # the tracker's own log has each point
    got = [(m["key"], m["value"], m["via"], m.get("step")) for m in collector.metrics()]
    assert got == [
        ("train/loss", 0.0987654321, "wandb", 0),  # no step given: the agent's step count (0)
        ("train/loss", 0.123456789, "wandb", 5),
        ("lr", 3e-4, "wandb", 5),  # "note" is text: skipped
        ("host_loss", 2.5, "wandb", 6),  # the fake beside it was skipped, unread
        ("train/loss", 0.0555555555, "wandb", 7),
    ]
    assert not fake.read_by_trainmeter()


def test_tracker_exception_passes_through(offline: Path, collector) -> None:
    taps.install_all()
    run = wandb.init(project="tm-tap", dir=str(offline))
    run.finish()
    with pytest.raises(wandb.errors.UsageError, match="is finished"):
        run.log({"loss": 1.0})
    assert wandb_tap.TAP.enabled


def test_own_failure_disables_wandb_tap_alone(offline, collector, monkeypatch, capsys) -> None:
    taps.install_all()
    monkeypatch.setattr(wandb_tap, "step_or_current", lambda _step: 1 / 0)
    run = wandb.init(project="tm-tap", dir=str(offline))
    run.log({"loss": 0.31415926})
    run.log({"loss": 0.27182818})
    run.finish()
    data = run_file(offline, b"0.31415926", b"0.27182818")
    assert b"0.31415926" in data and b"0.27182818" in data
    assert capsys.readouterr().err.count("the wandb tap failed (ZeroDivisionError") == 1
    assert not wandb_tap.TAP.enabled
    assert collector.metrics("wandb") == []
    from trainmeter.agent.taps import tensorboard as tb_tap

    assert tb_tap.TAP.enabled
