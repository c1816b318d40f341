"""Data-loader waits, eval spans and checkpoints measured in a real loop."""

from __future__ import annotations

from conftest import run_tiny_lm


def test_workers_eval_and_checkpoint_phases(workdir):
    run = run_tiny_lm(
        workdir,
        "--steps",
        "4",
        "--accum",
        "2",
        "--workers",
        "2",
        "--eval-every",
        "2",
        "--ckpt-every",
        "2",
    )
    assert run.rc == 0, run.stderr
    assert run.truth()["steps"] == 4
    assert {"dataloader", "checkpoint", "eval"} <= run.probes()
    data_s, data_n = run.phase("data")
    # 4 steps x 2 micro-batches = 8 next() calls on the training loader; the eval loop does not
    # use a loader, and worker processes (fork) still deliver every batch
    assert data_n == 8 and data_s > 0
    eval_s, eval_n = run.phase("eval")
    assert eval_n == 2 and eval_s > 0  # eval after steps 2 and 4
    ckpt_s, ckpt_n = run.phase("checkpoint")
    assert ckpt_n == 2 and ckpt_s > 0
    assert sorted(p.name for p in workdir.glob("ckpt*.pt")) == ["ckpt1.pt", "ckpt3.pt"]
    # worker processes do not resend the parent's steps
    assert run.steps_total("k") == 4
