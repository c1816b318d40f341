"""The agent's samples per step and the DataLoader's worker count, from a real loop.

tiny_lm with --batch 3 --accum 2: each micro-batch's token tensor is (3, T), so the first
step sees 2 micro-batches of 3 sequences: samples_per_step = 3 x 2 = 6. Its DataLoader has
--workers 0.
"""

from __future__ import annotations

from conftest import run_tiny_lm


def test_samples_per_step_is_batch_size_times_micro_batches(workdir):
    run = run_tiny_lm(workdir, "--steps", "3", "--accum", "2", "--batch", "3")
    assert run.rc == 0, run.stderr
    (fact,) = run.fact_records("samples_per_step")
    assert fact["d"]["value"] == 6 and fact["d"]["source"] == "detected"
    assert "batch size 3 of the first data batch (dim 0) x 2 data batch(es)" in fact["d"]["note"]
    assert run.facts()["dataloader_workers"] == 0
    # the counted step gives FLOPs per step beside FLOPs per token
    assert run.facts()["counted_flops_per_step"] > 0
