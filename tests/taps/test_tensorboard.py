"""The TensorBoard tap on the real `torch.utils.tensorboard.SummaryWriter`."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

pytest.importorskip("tensorboard")  # the framework extra; CI installs it
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402
from torch.utils.tensorboard import SummaryWriter  # noqa: E402

from trainmeter.agent import taps  # noqa: E402
from trainmeter.agent.probes import step_state  # noqa: E402
from trainmeter.agent.taps import tensorboard as tb_tap  # noqa: E402


def scalars(logdir: Path, tag: str) -> list[tuple[int, float]]:
    acc = EventAccumulator(str(logdir))
    acc.Reload()
    return [(e.step, e.value) for e in acc.Scalars(tag)]


def test_install_registers_every_tap_without_importing_trackers() -> None:
    names = taps.install_all()
    assert names == ["wandb", "tensorboard", "mlflow", "transformers", "lightning"]
    # torch.utils.tensorboard is already imported here, so its writer is wrapped at once
    assert getattr(SummaryWriter.add_scalar, "__trainmeter_tap__", None) == "tensorboard"
    # the wrapper keeps the signature the tracker documents
    assert inspect.signature(SummaryWriter.add_scalar) == inspect.signature(
        SummaryWriter.add_scalar.__wrapped__
    )
    assert SummaryWriter.add_scalar.__doc__ == SummaryWriter.add_scalar.__wrapped__.__doc__


def test_no_tap_env_is_read_in_one_place(monkeypatch: pytest.MonkeyPatch) -> None:
    from trainmeter.agent import boot

    monkeypatch.setenv("TRAINMETER_NO_TAP", "1")
    assert boot.taps_wanted() is False  # boot then never calls install_all
    assert not hasattr(SummaryWriter.add_scalar, "__trainmeter_tap__")
    monkeypatch.delenv("TRAINMETER_NO_TAP")
    assert boot.taps_wanted() is True
    sources = [
        path.read_text()
        for path in Path(boot.__file__).parent.rglob("*.py")
        if "NO_TAP" in path.read_text()
    ]
    assert len(sources) == 1  # boot.py alone reads the switch


def test_add_scalar_forwarded_and_recorded(tmp_path: Path, collector) -> None:
    taps.install_all()
    writer = SummaryWriter(log_dir=str(tmp_path))
    returned = writer.add_scalar("train/loss", 0.75, global_step=7)
    writer.add_scalar("train/loss", 0.5, 8)
    writer.add_scalars("lr", {"head": 0.25, "body": 0.125}, 9)
    writer.close()
    assert returned is None  # what the tracker returns, unchanged
    # the tracker's own event file holds both points
    assert scalars(tmp_path, "train/loss") == [(7, 0.75), (8, 0.5)]
    got = [(m["key"], m["value"], m["via"], m["step"]) for m in collector.metrics()]
    assert got == [
        ("train/loss", 0.75, "tensorboard", 7),
        ("train/loss", 0.5, "tensorboard", 8),
        ("lr/head", 0.25, "tensorboard", 9),
        ("lr/body", 0.125, "tensorboard", 9),
    ]  # add_scalars' internal writers did not add a second copy


def test_step_falls_back_to_optimizer_steps(tmp_path: Path, collector, monkeypatch) -> None:
    taps.install_all()
    monkeypatch.setattr(step_state.state, "n_steps", 41)  # optimizer steps the step probe counted
    writer = SummaryWriter(log_dir=str(tmp_path))
    writer.add_scalar("loss", 2.0)
    writer.close()
    assert [(m["value"], m["step"]) for m in collector.metrics()] == [(2.0, 41)]


def test_tracker_exception_passes_through_untouched(tmp_path: Path, collector) -> None:
    taps.install_all()
    writer = SummaryWriter(log_dir=str(tmp_path))
    theirs = OSError("disk full, says the writer")

    def broken_file_writer():
        raise theirs

    writer._get_file_writer = broken_file_writer
    with pytest.raises(OSError) as caught:
        writer.add_scalar("loss", 1.5, 1)
    assert caught.value is theirs
    assert tb_tap.TAP.enabled  # the tracker failing is not the tap failing
    writer.close()


def test_cuda_tensor_is_skipped_unread(tmp_path: Path, collector, cuda_like) -> None:
    taps.install_all()
    writer = SummaryWriter(log_dir=str(tmp_path))
    fake = cuda_like()
    with pytest.raises(NotImplementedError):  # the real writer refuses the fake on its own
        writer.add_scalar("cuda_loss", fake, 1)
    writer.add_scalar("host_loss", 3.0, 2)
    writer.close()
    assert fake.readers == []  # nobody read it: not the tap, and the writer refused it unread
    assert [(m["key"], m["value"]) for m in collector.metrics()] == [("host_loss", 3.0)]


def test_own_failure_disables_this_tap_alone(tmp_path: Path, collector, monkeypatch, capsys):
    taps.install_all()

    def broken(*_args, **_kwargs):
        raise KeyError("a bug in the tap")

    monkeypatch.setattr(tb_tap.TAP, "record", broken)
    writer = SummaryWriter(log_dir=str(tmp_path))
    writer.add_scalar("loss", 0.5, 1)
    writer.add_scalar("loss", 0.25, 2)
    writer.close()
    assert scalars(tmp_path, "loss") == [(1, 0.5), (2, 0.25)]  # both calls still went through
    err = capsys.readouterr().err
    assert err.count("the tensorboard tap failed") == 1
    assert not tb_tap.TAP.enabled
    assert collector.metrics("tensorboard") == []
    # another tap is still on: emit-like values through the MLflow tap's own recorder
    from trainmeter.agent.taps import mlflow as mlflow_tap

    assert mlflow_tap.TAP.enabled
    mlflow_tap.TAP.record("other", 1.25, 3)
    assert [(m["key"], m["via"]) for m in collector.metrics()] == [("other", "mlflow")]


def test_step_given_as_tensors(tmp_path: Path, collector, cuda_like, monkeypatch) -> None:
    import torch

    taps.install_all()
    monkeypatch.setattr(step_state.state, "n_steps", 12)
    writer = SummaryWriter(log_dir=str(tmp_path))
    writer.add_scalar("loss", 1.0, torch.tensor(5))  # a CPU step tensor is read
    fake_step = cuda_like()
    try:
        writer.add_scalar("loss", 2.0, fake_step)  # a CUDA one is not: the agent's count
    except Exception:  # noqa: BLE001 - whatever the writer makes of the fake is its business
        pass
    writer.close()
    assert [(m["value"], m["step"]) for m in collector.metrics()] == [(1.0, 5), (2.0, 12)]
    assert not fake_step.read_by_trainmeter()
