"""`tm view DIR1 DIR2`: several nodes' run directories shown as one job in the dashboard.

Two short runs of the example on the fake H100, as node 0 and node 1 of one Slurm job (run id
`job9`, ranks 0 and 1). The page is served the very snapshot `tm summary DIR1 DIR2 --json`
prints (both join the nodes with `replay_many.replay_job`), and its curves are node 0's, the
node holding global rank 0 whose steps and loss that snapshot shows.
"""

from __future__ import annotations

import json
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from ..conftest import EXAMPLES, REPO, default_signals, run_dirs, run_tm, tm_env

FAKE_H100 = REPO / "tests" / "fixtures" / "nvml" / "h100_sxm_gpm.json"
URL = re.compile(r"(http://127\.0\.0\.1:\d+/)")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory) -> tuple[Path, list[Path]]:
    root = tmp_path_factory.mktemp("job")
    procs = []
    for node in (0, 1):
        cwd = root / f"node{node}"
        cwd.mkdir()
        env = tm_env(
            TRAINMETER_FAKE_NVML=str(FAKE_H100),
            SLURM_JOB_ID="job9",
            SLURM_NODEID=str(node),
            SLURM_NNODES="2",
            RANK=str(node),
            WORLD_SIZE="2",
        )
        args = ["--no-web", "--convention", "megatron", str(EXAMPLES / "tiny_gpt.py")]
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "trainmeter", *args, "--steps", "40"],
                cwd=cwd,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    for proc in procs:
        _, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
    dirs = [run_dirs(root / f"node{n}")[0] for n in (0, 1)]
    return root, dirs


def _serve_view(args: list[str], cwd: Path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainmeter", "view", *args, "--port", "0"],
        cwd=cwd,
        env=tm_env(),
        preexec_fn=default_signals,  # it is stopped by SIGINT: never inherit it ignored
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stderr], daemon=True).start()
    deadline = time.monotonic() + 120
    seen = []
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            assert proc.poll() is None, "".join(seen)
            continue
        seen.append(line)
        match = URL.search(line)
        if match:
            return proc, match.group(1)
    proc.kill()
    raise AssertionError("no dashboard URL: " + "".join(seen))


def test_view_of_two_nodes_serves_the_snapshot_of_tm_summary_of_both(two_nodes):
    root, (node0, node1) = two_nodes
    # node 1 named first: the job clock is found by rank, not by order
    summary = run_tm(["summary", str(node1), str(node0), "--json"], root, timeout=120)
    assert summary.returncode == 0, summary.stderr
    expected = json.loads(summary.stdout)
    proc, url = _serve_view([str(node1), str(node0)], root)
    try:
        with urllib.request.urlopen(url + "api/state", timeout=30) as resp:
            state = json.loads(resp.read())
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    assert state["mode"] == "view" and state["finished"]
    assert state["snapshot"] == expected
    job = state["snapshot"]["job"]
    assert job["run_id"] == "job9" and job["nodes"] == 2 and job["ranks"] == [0, 1]
    # the job adds the nodes' tokens: 40 steps x 2,048 tokens a step on each of the two nodes
    per_node = [json.loads((d / "summary.json").read_text()) for d in (node0, node1)]
    assert state["snapshot"]["tokens_seen"] == sum(s["tokens_seen"] for s in per_node) == 163_840
    # both directories are named on the page; the curves are node 0's (global rank 0)
    assert str(node0) in state["run_dir"] and str(node1) in state["run_dir"]
    series = state["history"]["series"]
    assert series["train_loss"]["step"][-1] == 40
    # the engine's tokens/s over the run is node 0's own (the job's is the sum of both)
    node0_tps, node1_tps = (s["tokens_per_s"] for s in per_node)
    assert node0_tps != node1_tps
    assert series["tokens_per_s"]["last"][-1] == node0_tps


def test_view_refuses_the_same_run_twice(two_nodes):
    root, (node0, _) = two_nodes
    res = run_tm(["view", str(node0), str(node0), "--port", "0"], root, timeout=60)
    assert res.returncode == 2
    assert "the same run is named twice" in res.stderr
