"""Which job and node a run is: --run-id, the scheduler, the launcher; and what hello says."""

from __future__ import annotations

import pytest

from trainmeter.agent import boot
from trainmeter.cli.args import UsageError, parse_run_args
from trainmeter.supervisor.job import clock_pair, identity

TORCHRUN = ["torchrun", "--nnodes=2", "--node_rank", "1", "--rdzv-id", "rdzv9", "train.py",
            "--node_rank", "5", "--rdzv-id", "theirs"]


def test_run_id_precedence_flag_then_scheduler_then_launcher():
    assert identity("mine", TORCHRUN, {"SLURM_JOB_ID": "77"})["run_id_source"] == "--run-id"
    assert identity(None, TORCHRUN, {"SLURM_JOB_ID": "77"})["run_id"] == "77"
    got = identity(None, TORCHRUN, {})
    assert (got["run_id"], got["run_id_source"]) == ("rdzv9", "--rdzv-id")  # not the script's
    assert (got["node_rank"], got["nodes"], got["node_source"]) == (1, 2, "argv")
    # torchrun's default id "none" names no job; an elastic --nnodes range is no count
    bare = identity(None, ["torchrun", "--rdzv_id=none", "--nnodes=1:4", "t.py"], {})
    assert bare["run_id"] is None and bare["nodes"] is None and bare["node_rank"] is None
    slurm = identity(None, ["srun", "python", "t.py"], {"SLURM_NODEID": "3", "SLURM_NNODES": "4"})
    assert (slurm["node_rank"], slurm["nodes"], slurm["node_source"]) == (3, 4, "env")


def test_clock_pair_reads_both_clocks_together():
    import time

    pair = clock_pair()
    assert abs(pair["unix"] - time.time()) < 5 and abs(pair["monotonic"] - time.monotonic()) < 5


def test_run_id_and_metrics_addr_flags():
    opts = parse_run_args(["--run-id", "job-7.a", "--metrics-addr", ":9400", "train.py"])
    assert opts.run_id == "job-7.a" and opts.metrics_addr == ("127.0.0.1", 9400)
    assert parse_run_args(["--metrics-addr=[::1]:9", "t.py"]).metrics_addr == ("::1", 9)
    for bad in (["--run-id", "a b"], ["--metrics-addr", "9400"], ["--metrics-addr", "h:99999"]):
        with pytest.raises(UsageError):
            parse_run_args([*bad, "t.py"])


def test_hello_names_the_node_from_torchrun_or_slurm(monkeypatch):
    for name in ("GROUP_RANK", "SLURM_NODEID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SLURM_NODEID", "2")
    assert boot._first_int("GROUP_RANK", "SLURM_NODEID") == 2
    monkeypatch.setenv("GROUP_RANK", "1")
    assert boot._first_int("GROUP_RANK", "SLURM_NODEID") == 1
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "none")
    assert boot._run_id() is None
    monkeypatch.setenv("SLURM_JOB_ID", "991")
    assert boot._run_id() == "991"
