"""Lightning under the real `tm`: steps, tokens and the loss from `self.log`, bit-identical."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..conftest import latest_summary, run_dirs, run_tm, tm_env
from .conftest import Ran, copy_script, metric_records, run_plain

pytest.importorskip("lightning")

pytestmark = pytest.mark.slow


def test_lightning_self_log(workdir: Path) -> None:
    copy_script(workdir, "lightning_lm.py")
    plain = run_plain(workdir, ["lightning_lm.py"], tm_env()).check().answer
    answer = Ran(run_tm(["--no-web", "lightning_lm.py"], workdir)).check().answer
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
