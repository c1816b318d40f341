"""Lightning under the real `tm`: steps, tokens and the loss from `self.log`, bit-identical."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..conftest import latest_summary, read_events, run_dirs, run_tm
from .conftest import Ran, copy_script, metric_records, run_pair

pytest.importorskip("lightning")

pytestmark = pytest.mark.slow


def test_lightning_self_log(workdir: Path) -> None:
    ran, under = run_pair(workdir, "lightning_lm.py", [], ["--no-web"])
    plain = ran.check().answer
    answer = under.check().answer
    assert answer["losses"] == plain["losses"]  # bit-identical, step by step
    assert answer["weights"] == plain["weights"]

    summary = latest_summary(workdir)
    assert summary["steps"] == 5
    # 5 steps of a 4 x 16 batch of token ids: 5 * 64 = 320 tokens
    assert summary["tokens_seen"] == 320
    loss = summary["series"]["train_loss"]
    assert (loss["source"], loss["via"], loss["key"], loss["count"]) == (
        "tapped",
        "lightning",
        "train_loss",
        5,
    )
    assert loss["value"] == float.fromhex(plain["losses"][-1])
    metrics = metric_records(run_dirs(workdir)[-1])
    # Lightning's TensorBoard logger wrote the same values: they are not counted again
    assert {m["via"] for m in metrics} == {"lightning"}
    assert [float(m["value"]).hex() for m in metrics] == plain["losses"]
    assert list(workdir.glob("lightning_logs/version_*/events.out.tfevents.*"))


def test_lightning_values_are_what_its_loggers_receive(workdir: Path) -> None:
    """val_loss is logged per batch with self.log; Lightning's logger receives the epoch mean,
    and so must trainmeter. The model is built inside the LightningModule; validation runs
    twice (every 2 of 4 steps), and Lightning leaves eval mode without calling train()."""
    copy_script(workdir, "lightning_val.py")
    answer = Ran(run_tm(["--no-web", "lightning_val.py"], workdir)).check().answer
    run_dir = run_dirs(workdir)[-1]
    metrics = metric_records(run_dir)
    assert [m["value"] for m in metrics if m["key"] == "val_loss"] == answer["val_means"]
    assert [float(m["value"]).hex() for m in metrics if m["key"] == "train_loss"] == answer[
        "losses"
    ]
    events = read_events(run_dir)
    facts = {r["d"]["key"]: r["d"]["value"] for r in events if r["kind"] == "fact"}
    assert (facts["n_layers"], facts["d_model"]) == (3, 16)  # Net's config, inside the module
    # Net: embedding 64*16 + 3 linears (16*16+16) + head (16*64+64) = 1024 + 816 + 1088
    assert (facts["n_params"], facts["n_embedding_params"]) == (2928, 1024)
    phases: dict[str, int] = {}
    for r in events:
        if r["kind"] == "phase":
            phases[r["d"]["name"]] = phases.get(r["d"]["name"], 0) + r["d"]["n"]
    assert phases["eval"] == 2  # two validation runs
    assert phases["data"] >= 4  # every one of the 4 training batches (validation's are eval's)


@pytest.mark.parametrize("order", ["g-first", "d-first"])
def test_a_lightning_gan_with_toggled_optimizers(workdir: Path, order: str) -> None:
    """Lightning's GAN shape: one module holding both models, manual optimization, each update
    inside `toggle_optimizer`, which switches the other model's weights off. Before: the
    generator first, the discriminator's 449 weights were 'frozen' (off at the first forward,
    though its optimizer trains them); the discriminator first, the models were 'Sequential'
    and 'parameters outside any model found' (the module's children had no names)."""
    args = ["--d-first"] if order == "d-first" else []
    ran, under = run_pair(workdir, "lightning_gan.py", args, ["--no-web"])
    plain, answer = ran.check().answer, under.check().answer
    assert answer["losses"] == plain["losses"]
    summary = latest_summary(workdir)
    assert summary["steps"] == answer["steps"]
    facts = {k: v["value"] for k, v in summary["facts"].items()}
    assert facts["n_params"] == answer["generator"] + answer["discriminator"]
    assert facts["n_frozen_params"] == 0  # every weight is trained by one of the optimizers
    # the discriminator first, it is the root; the generator first, the module is, and its
    # forward runs the generator alone: the discriminator, called apart with its own optimizer,
    # is a model of its own (before: one model, the module's 1,069)
    first, second = ("discriminator", "generator") if order == "d-first" else (
        "generator", "discriminator"
    )
    assert [(m["name"], m["params"]) for m in facts["models"]] == [
        (first, answer[first]), (second, answer[second])
    ]
