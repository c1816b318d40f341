"""The Lightning tap on a real `lightning.pytorch.Trainer` with its default TensorBoard logger."""

from __future__ import annotations

from pathlib import Path

import pytest

pl = pytest.importorskip("lightning.pytorch")  # the framework extra; CI installs it
import torch  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from trainmeter.agent import taps  # noqa: E402
from trainmeter.agent.taps import lightning as pl_tap  # noqa: E402


class Tiny(pl.LightningModule):
    def __init__(self, fail_at: int | None = None) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)
        self.losses: list[float] = []
        self.fail_at = fail_at

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        self.losses.append(loss.item())
        if self.fail_at == batch_idx:
            self.log("train_loss", "not a number")  # Lightning's own validation refuses this
        self.log("train_loss", loss)
        self.log_dict({"aux": torch.tensor(0.5)})
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def fit(root: Path, module: Tiny, steps: int = 3) -> None:
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(8, 4), torch.randn(8, 1))
    trainer = pl.Trainer(
        max_steps=steps,
        default_root_dir=str(root),
        log_every_n_steps=1,
        accelerator="cpu",
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(module, DataLoader(data, batch_size=2))


def test_self_log_tapped_once_despite_its_logger(tmp_path: Path, collector) -> None:
    taps.install_all()
    module = Tiny()
    fit(tmp_path, module)
    metrics = collector.metrics()
    assert {m["via"] for m in metrics} == {"lightning"}  # the TensorBoard logger added nothing
    assert [m["value"] for m in metrics if m["key"] == "train_loss"] == module.losses
    assert [m["value"] for m in metrics if m["key"] == "aux"] == [0.5, 0.5, 0.5]
    assert list(tmp_path.glob("lightning_logs/version_0/events.out.tfevents.*"))  # it did write


def test_lightning_error_passes_through(tmp_path: Path, collector) -> None:
    taps.install_all()
    with pytest.raises(Exception) as caught:
        fit(tmp_path, Tiny(fail_at=1))
    assert "train_loss" in str(caught.value)  # Lightning's message about the bad value
    assert pl_tap.TAP.enabled


def test_own_failure_disables_lightning_tap_alone(tmp_path, collector, monkeypatch, capsys):
    taps.install_all()
    monkeypatch.setattr(pl_tap, "step_or_current", lambda _step: None.missing)
    module = Tiny()
    fit(tmp_path, module)
    assert len(module.losses) == 3
    assert capsys.readouterr().err.count("the lightning tap failed (AttributeError") == 1
    assert not pl_tap.TAP.enabled
    assert collector.metrics() == []


class Validated(Tiny):
    """Logs `val` per validation batch: 1.0, 2.0, 4.0; Lightning's loggers get their mean."""

    def validation_step(self, batch, batch_idx):
        self.log("val", torch.tensor([1.0, 2.0, 4.0][batch_idx]))


@pytest.mark.parametrize("logger", [True, False])
def test_values_are_what_lightning_hands_its_loggers(tmp_path: Path, collector, logger) -> None:
    taps.install_all()
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(6, 4), torch.randn(6, 1))
    trainer = pl.Trainer(
        max_steps=2,
        val_check_interval=2,
        num_sanity_val_steps=0,
        default_root_dir=str(tmp_path),
        logger=logger,
        log_every_n_steps=1,
        accelerator="cpu",
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(Validated(), DataLoader(data, batch_size=2), DataLoader(data, batch_size=2))
    # one validation (after step 2) over 3 batches of 2: (1*2 + 2*2 + 4*2) / 6 = 7/3 (float32)
    vals = [m["value"] for m in collector.metrics() if m["key"] == "val"]
    assert vals == [pytest.approx(7 / 3, rel=1e-6)]  # the epoch mean, not the last batch's 4.0


def test_validate_and_predict_are_eval_spans(tmp_path: Path, collector) -> None:
    """Lightning leaves eval mode by setting `.training` flags, never through `train()`: its
    loops' runs open and close the span, and nothing stays open after them."""
    from trainmeter.agent.probes import phases

    taps.install_all()
    module = Tiny()
    trainer = pl.Trainer(
        default_root_dir=str(tmp_path),
        logger=False,
        accelerator="cpu",
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    data = DataLoader(TensorDataset(torch.randn(4, 4), torch.randn(4, 1)), batch_size=2)
    module.validation_step = lambda batch, batch_idx: None
    module.predict_step = lambda batch, batch_idx: module.layer(batch[0])
    before = phases._totals["eval"][1]
    trainer.validate(module, data)
    trainer.predict(module, data)
    assert phases._totals["eval"][1] - before == 2  # one span each
    assert not phases.eval_open()  # the data waits of what follows are training's again
