"""Real loops under the real `tm`: what the engine reports against what the loop did."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ..conftest import latest_summary, run_tm, tm_env

pytestmark = pytest.mark.slow
SCRIPTS = Path(__file__).parent / "scripts"


def test_torchrun_two_ranks_under_tm(tmp_path) -> None:
    env = tm_env(OMP_NUM_THREADS="1")
    result = run_tm(
        ["--", sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
         str(SCRIPTS / "ddp_emit.py")],
        cwd=tmp_path, env=env, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    s = latest_summary(tmp_path)
    assert s["facts"]["dp"]["value"] == 2
    assert s["steps"] == 8  # rank 0 is the step clock: not 16
    # tokens per step summed over ranks: 2 ranks x 4 x 16 = 128, eight steps
    assert s["tokens_seen"] == 8 * 2 * 4 * 16
    assert set(s["ranks"]["step_time_s"]) == {"0", "1"}
    # rank 1 sleeps 0.2 s a step against rank 0's 0.1 s; DDP's all-reduce makes rank 0 wait
    # for it, so the step times come out close: the slowest is either, the spread is small
    assert s["ranks"]["slowest"] in {"0", "1"}
    assert s["ranks"]["step_time_s"]["1"] >= 0.2
    # both ranks emitted their loss; the series is one copy, rank 0's
    assert s["series"]["train_loss"]["count"] == 8


def test_accumulation_workers_eval_and_checkpoints_split_the_wall_time(tmp_path) -> None:
    result = run_tm([str(SCRIPTS / "phases_loop.py"), str(tmp_path)], cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr
    s = latest_summary(tmp_path)
    assert s["steps"] == 6
    assert s["tokens_seen"] == 6 * 4 * 2 * 8  # 4 micro-batches of 2 x 8 a step
    parts = {p["name"]: p for p in s["time"]["parts"]}
    for name in ("startup", "data", "checkpoint", "eval", "compute", "after"):
        assert name in parts, name
    for name in ("data", "checkpoint", "eval"):
        assert parts[name]["measured"] is True
        assert parts[name]["s"] > 0, name
    assert parts["eval"]["s"] >= 2 * 3 * 0.05 * 0.9  # two eval spans of three 50 ms batches
    assert parts["checkpoint"]["n"] == 2
    total = sum(p["s"] for p in parts.values())
    assert total == pytest.approx(s["time"]["elapsed_s"], rel=1e-6, abs=1e-6)
    assert 0 < s["time"]["goodput"] < 1


def test_padded_batches_count_real_and_padded_tokens(tmp_path) -> None:
    result = run_tm([str(SCRIPTS / "padded_batches.py")], cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr
    words = result.stdout.split()
    real, padded = int(words[words.index("REAL") + 1]), int(words[words.index("PADDED") + 1])
    s = latest_summary(tmp_path)
    pad = s["padding"]
    assert pad["tokens_real"] == real
    assert pad["tokens_total"] == padded
    assert pad["share"] == pytest.approx(1 - real / padded)
    assert s["tokens_seen"] == real  # tokens/s and MFU use the real tokens
