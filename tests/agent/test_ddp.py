"""torchrun with two gloo DDP ranks: each rank's agent reports with its rank, and dp = 2."""

from __future__ import annotations

import pytest

from conftest import SCRIPTS, run_agent


@pytest.mark.slow
def test_torchrun_two_ranks(workdir):
    run = run_agent(
        [
            "python",
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node=2",
            str(SCRIPTS / "ddp_lm.py"),
        ],
        workdir,
        timeout=240,
        OMP_NUM_THREADS="1",
    )
    assert run.rc == 0, run.stderr
    assert "rank 0 done" in run.stdout and "rank 1 done" in run.stdout
    by_rank = {}
    for rec in run.kind("hello"):
        if rec["rank"] is not None:
            by_rank.setdefault(rec["rank"], []).append(rec["d"])
    assert set(by_rank) == {0, 1}
    for rank, hellos in by_rank.items():
        assert hellos[-1]["world_size"] == 2
        assert hellos[-1]["local_rank"] == rank
        assert "steps" in hellos[-1]["probes"]
    dp = {r["rank"]: r["d"]["value"] for r in run.fact_records("dp")}
    assert dp == {0: 2, 1: 2}
    for rank in (0, 1):
        steps = [r["d"] for r in run.kind("step") if r["rank"] == rank]
        assert sum(d["k"] for d in steps) == 3
        assert sum(d["tokens"] for d in steps) == 3 * 2 * 6  # per rank: 3 steps of 2 x 6
