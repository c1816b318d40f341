"""N, E and dp under sharded data parallelism, on two real gloo ranks (torchrun, CPU).

The model: Embedding(64, 16) + 2 x Linear(16, 16) + Linear(16, 64):
N = 64*16 + 2*(16*16 + 16) + (16*64 + 64) = 1024 + 544 + 1088 = 2656, E = 1024, dp = 2.
Each rank holds about half of it; the numbers must be the whole model's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import SCRIPTS, run_agent

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("mode", ["fsdp2", "fsdp1"])
def test_sharded_model_counts_the_whole_model(workdir, mode):
    run = run_agent(
        [
            "python",
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node=2",
            str(SCRIPTS / "fsdp_lm.py"),
            mode,
        ],
        workdir,
        timeout=240,
        OMP_NUM_THREADS="1",
    )
    assert run.rc == 0, run.stderr
    for key, want in (("n_params", 2656), ("n_embedding_params", 1024), ("dp", 2)):
        got = {r["rank"]: r["d"]["value"] for r in run.fact_records(key)}
        assert got == {0: want, 1: want}, (key, got)


def test_layouts_beyond_two_cpu_ranks():
    """HSDP, data x tensor parallel, FSDP1 hybrid sharding and a tied FSDP1 model on 8 ranks,
    laid out by torch itself on its fake process group (the script has the arithmetic)."""
    done = subprocess.run(
        [sys.executable, str(SCRIPTS / "mesh_shapes.py")],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.splitlines()[-1])
    assert got == {
        "fsdp2_hsdp": [3184, 1024, 8],  # dp = 2 replicas x 4 shards, not the shard group's 4
        "fsdp2_dp_x_tp": [3184, 1024, 2],  # dp = the data dimension only, not 2 x 4 ranks
        "fsdp2_named_dp_x_tp": [3184, 1024, 2],  # the same, from the full mesh's "dp"
        "fsdp1_hybrid": [3184, 1024, 8],  # the whole model, not one rank's quarter (796)
        "fsdp1_flat_tied": [1296, 0, 8],  # the tied table is no lookup-only embedding
    }
