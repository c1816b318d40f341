"""A loop in which nothing marks a step (training-mode forwards with gradients on, but no
optimizer step and no backward): `steps` is absent with the reason, never a silent 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ..conftest import run_dirs, run_tm, tm_env

pytest.importorskip("torch")

PROGRAM = """
import torch
model = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 10))
for _ in range(3):
    model(torch.randint(0, 10, (2, 5))).sum()  # a forward, never a backward or an update
print("done")
"""


def test_forwards_without_any_step_signal_leave_steps_absent_with_the_reason(
    tmp_path: Path,
) -> None:
    (tmp_path / "forward_only.py").write_text(PROGRAM)
    result = run_tm(
        ["--no-web", "-q", "forward_only.py"], tmp_path, env=tm_env(OMP_NUM_THREADS="1")
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "done"
    (run_dir,) = run_dirs(tmp_path)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["facts"]["step_signal"]["value"] == "none"
    assert "steps" not in summary or summary["steps"] is None
    reason = summary["absent"]["steps"]
    assert "no optimizer step and no backward pass" in reason and "Sequential" in reason
