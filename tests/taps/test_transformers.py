"""The Hugging Face tap on a real `Trainer` training a tiny GPT-2 built from a config."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

transformers = pytest.importorskip("transformers")  # the framework extra; CI installs it
import torch  # noqa: E402

from trainmeter.agent import taps  # noqa: E402
from trainmeter.agent.taps import transformers as hf_tap  # noqa: E402


def tiny_trainer(out: Path, callbacks=None):
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_layer=1,
        n_head=2,
        n_embd=32,
        vocab_size=64,
        n_positions=16,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    model = transformers.GPT2LMHeadModel(config)
    ids = torch.randint(0, 64, (8, 16), generator=torch.Generator().manual_seed(1))
    data = [{"input_ids": row, "labels": row} for row in ids]
    args = transformers.TrainingArguments(
        output_dir=str(out),
        per_device_train_batch_size=2,
        max_steps=3,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
        dataloader_num_workers=0,
        seed=0,
    )
    return transformers.Trainer(model=model, args=args, train_dataset=data, callbacks=callbacks)


def test_trainer_log_tapped_equals_log_history(tmp_path: Path, collector) -> None:
    taps.install_all()
    assert getattr(transformers.Trainer.log, "__trainmeter_tap__", None) == "transformers"
    assert inspect.signature(transformers.Trainer.log) == inspect.signature(
        transformers.Trainer.log.__wrapped__
    )
    trainer = tiny_trainer(tmp_path)
    trainer.train()
    history = [h for h in trainer.state.log_history if "loss" in h]
    assert [h["step"] for h in history] == [1, 2, 3]
    metrics = collector.metrics("transformers")
    losses = [(m["step"], m["value"]) for m in metrics if m["key"] == "loss"]
    assert losses == [(h["step"], h["loss"]) for h in history]
    assert {"learning_rate", "grad_norm"} <= {m["key"] for m in metrics}
    # the end-of-training summary: runtime goes through, its run-mean train_loss does not
    assert "train_runtime" in {m["key"] for m in metrics}
    assert "train_loss" not in {m["key"] for m in metrics}
    assert "train_loss" in trainer.state.log_history[-1]  # the tracker itself still has it


class Boom(transformers.TrainerCallback):
    error = LookupError("the callback's own failure")

    def on_log(self, args, state, control, logs=None, **kwargs):
        raise self.error


def test_exception_from_inside_log_passes_through(tmp_path: Path, collector) -> None:
    taps.install_all()
    trainer = tiny_trainer(tmp_path, callbacks=[Boom()])
    with pytest.raises(LookupError) as caught:
        trainer.train()
    assert caught.value is Boom.error
    assert hf_tap.TAP.enabled


def test_own_failure_disables_transformers_tap_alone(tmp_path, collector, monkeypatch, capsys):
    taps.install_all()
    monkeypatch.setattr(hf_tap, "step_or_current", lambda _step: [][0])
    trainer = tiny_trainer(tmp_path)
    trainer.train()
    assert [h["step"] for h in trainer.state.log_history if "loss" in h] == [1, 2, 3]
    assert capsys.readouterr().err.count("the transformers tap failed (IndexError") == 1
    assert not hf_tap.TAP.enabled
    assert collector.metrics() == []
