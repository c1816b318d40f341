"""Two torchrun node groups on this machine, each under its own `tm`, stand for a two-node job.

One real-process test (it costs some 40 s): a real Prometheus scrapes both nodes' `/metrics`,
its summed tokens/s agrees with the nodes' own values, every panel of the Grafana dashboard
evaluates to data, and `tm summary DIR1 DIR2` shows the job as one run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ..conftest import REPO, reserved_port, run_dirs, run_tm, start_prometheus, tm_env

SCRIPT = Path(__file__).parent / "scripts" / "ddp_node.py"
NVML = REPO / "tests" / "fixtures" / "nvml" / "h100_sxm_gpm.json"
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
JOB = "job42"
BATCH_TOKENS = 4 * 32  # ddp_node.py: BATCH x SEQ tokens per rank and step


def get(url: str, timeout: float = 30) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.read()


def scrape(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    """A node's /metrics: metric name -> [(labels, value)]."""
    text = get(f"http://127.0.0.1:{port}/metrics").decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((sample.labels, sample.value))
    return out


def promql(port: int, expr: str, at: float | None = None) -> list[dict]:
    """`expr` evaluated by Prometheus now, or at the time `at` (seconds since the epoch)."""
    query = {"query": expr} if at is None else {"query": expr, "time": f"{at:.3f}"}
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode(query)
    try:
        body = json.loads(get(url))
    except urllib.error.HTTPError as exc:  # a bad expression: 400 with the parser's message
        raise AssertionError(f"{expr}: {exc.read().decode()}") from None
    assert body["status"] == "success", (expr, body)
    return body["data"]["result"]


class Served:
    """Each node's (steps, tokens/s) as its `/metrics` serves them, read every 50 ms on a
    thread: what a scrape by Prometheus may have read, each pair one snapshot's."""

    def __init__(self, ports: tuple[int, ...]) -> None:
        self.ports = ports
        self.pairs: dict[int, set[tuple[float, float]]] = {p: set() for p in ports}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.is_set():
            for port in self.ports:
                try:
                    got = scrape(port)
                    pair = (got["trainmeter_steps_total"][0][1], got["trainmeter_tokens_per_second"][0][1])
                except (OSError, KeyError, IndexError, ValueError):
                    continue
                self.pairs[port].add(pair)
            self._stop.wait(0.05)

    def __enter__(self) -> Served:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def held_as_served(prom: int, seen: Served) -> tuple[float, list[float]] | None:
    """(Prometheus's sum of the job's tokens/s, each node's tokens/s in it) when the scrape of
    each node that Prometheus holds is a pair the node was seen serving; None until then (a
    snapshot served between two of the test's reads is missed: a later scrape is taken).
    Everything is read at one evaluation time, so from the same scrape of each node."""
    at = time.time()
    by_node = {}
    for name in ("steps_total", "tokens_per_second"):
        for r in promql(prom, f'trainmeter_{name}{{run="{JOB}"}}', at):
            by_node.setdefault(r["metric"]["instance"], []).append(float(r["value"][1]))
    pairs = [tuple(by_node[f"127.0.0.1:{port}"]) for port in seen.ports]
    if not all(pair in seen.pairs[port] for pair, port in zip(pairs, seen.ports, strict=True)):
        return None
    [summed] = promql(prom, f'sum(trainmeter_tokens_per_second{{run="{JOB}"}})', at)
    return float(summed["value"][1]), [tps for _, tps in pairs]


def wait_for(what: str, check, timeout: float, procs=()):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for p in procs:
            assert p.poll() is None, f"a node exited early while waiting for {what}"
        try:
            value = check()
        except (OSError, KeyError, IndexError, ValueError):
            value = None
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.slow
def test_two_nodes_one_job_in_prometheus_grafana_and_tm_summary(tmp_path):
    if not Path(PROMETHEUS).exists():
        pytest.skip("prometheus is not installed (apt-get install prometheus)")
    # a port found free and let go is anybody's until its server binds it: the rendezvous's and
    # each node's /metrics are held from their pick to the test's end (their servers bind
    # beside the holder), and Prometheus's is its own pick, read from its log
    held = [reserved_port() for _ in range(3)]
    rdzv, m0, m1 = (port for _, port in held)
    logs: list = []
    # the ranks train until the test has read what it checks live (a fixed 18 s could run out
    # on a loaded machine before the last panel query); 600 s is a bound, never reached
    stop = tmp_path / "stop"
    env = tm_env(
        TRAINMETER_FAKE_NVML=str(NVML), SECONDS_TO_TRAIN="600", STOP_FILE=str(stop),
        OMP_NUM_THREADS="1",
    )
    nodes = []
    for node, port in ((0, m0), (1, m1)):
        cwd = tmp_path / f"node{node}"
        cwd.mkdir()
        cmd = [
            sys.executable, "-m", "trainmeter", "--no-web",
            "--metrics-addr", f"127.0.0.1:{port}",
            "--flops-per-token", "1M", "--convention", "megatron", "--budget-steps", "1000",
            "--", sys.executable, "-m", "torch.distributed.run", "--nnodes=2",
            f"--node_rank={node}", "--nproc_per_node=2", "--rdzv_backend=c10d",
            f"--rdzv-id={JOB}", f"--rdzv_endpoint=127.0.0.1:{rdzv}", str(SCRIPT),
        ]
        # output to a file, not a pipe: a rank left behind must never block the test's read;
        # each node in its own session, so a node that hangs is killed with all its ranks
        log = open(cwd / "node.log", "wb")  # noqa: SIM115 - closed with the node below
        nodes.append(
            subprocess.Popen(
                cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )
        logs.append(log)
    server = None
    try:
        config = tmp_path / "prometheus.yml"
        config.write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            "scrape_configs:\n"
            "  - job_name: trainmeter\n"
            "    static_configs:\n"
            f"      - targets: ['127.0.0.1:{m0}', '127.0.0.1:{m1}']\n"
        )
        server, prom = start_prometheus(PROMETHEUS, config, tmp_path / "tsdb", tmp_path / "prometheus.log")
        wait_for("prometheus", lambda: get(f"http://127.0.0.1:{prom}/-/ready"), 60)

        # both nodes steady: tokens/s measured and past the first 20 steps on each
        def steady():
            both = [scrape(p) for p in (m0, m1)]
            if all(
                s["trainmeter_steps_total"][0][1] >= 20 and "trainmeter_tokens_per_second" in s
                for s in both
            ):
                return both
            return None

        wait_for("both nodes to step steadily", steady, 240, nodes)
        # the job's tokens/s through Prometheus is the sum of what each node served at the
        # scrape Prometheus holds, exactly: a node's value moves with each snapshot, so it is
        # compared at the same snapshot, not read a moment before the scrape (CI's loaded box
        # can put seconds between the two)
        with Served((m0, m1)) as seen:
            summed, served = wait_for(
                "Prometheus to hold a scrape of each node that the test saw served",
                lambda: held_as_served(prom, seen), 120, nodes,
            )
        print(f"nodes' tokens/s as scraped {served}, sum {sum(served):.1f}; prometheus {summed:.1f}")
        assert summed == pytest.approx(sum(served), rel=1e-12)
        own = [scrape(p) for p in (m0, m1)]
        labels = {
            (s["trainmeter_info"][0][0]["run"], s["trainmeter_info"][0][0]["node"]) for s in own
        }
        assert labels == {(JOB, "0"), (JOB, "1")}  # one run, two nodes
        assert {r["rank"] for s in own for r, _ in s["trainmeter_rank_step_time_seconds"]} == {
            "0",
            "1",
            "2",
            "3",
        }
        # each rank's waits for the others, per node: every rank of the job across the two
        assert {r["rank"] for s in own for r, _ in s["trainmeter_rank_waited_seconds_total"]} == {
            "0", "1", "2", "3",
        }

        # every panel of the dashboard evaluates without error and returns data for the job
        dashboard = json.loads((REPO / "grafana" / "trainmeter.json").read_text())
        exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
        assert len(exprs) >= 10
        # (a CPU job has no caching allocator: its GPU memory panels evaluate, with no data)
        gpu_only = re.compile(r"trainmeter_memory_(allocated|reserved|total|alloc_retries|ooms)")
        for e in exprs:
            result = promql(prom, e.replace("$run", JOB))
            assert result or gpu_only.search(e), f"no data for panel expression {e}"
        variable = dashboard["templating"]["list"][0][
            "definition"
        ]  # label_values(trainmeter_info, run)
        assert promql(prom, variable.split("(", 1)[1].split(",")[0])  # the metric it lists runs of

        # the scrape endpoint serves /metrics alone, read-only
        with pytest.raises(urllib.error.HTTPError, match="404"):
            get(f"http://127.0.0.1:{m0}/")
    finally:
        stop.touch()  # the training ends now, at the same step on every rank
        for holder, _ in held:
            holder.close()
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        for p in nodes:
            try:
                p.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)  # tm and every rank it started
                p.wait(timeout=30)
            try:
                os.killpg(p.pid, signal.SIGKILL)  # a rank or launcher tm left behind, if any
            except ProcessLookupError:
                pass
        for log in logs:
            log.close()
    outs = [(tmp_path / f"node{n}" / "node.log").read_text(errors="replace") for n in (0, 1)]
    assert [p.returncode for p in nodes] == [0, 0], outs
    # each node's tm says which node of the job it watched, and its own ranks
    said = sorted(
        line
        for out in outs
        for line in out.splitlines()
        if line.startswith("trainmeter: ") and "; run " in line
    )
    assert len(said) == 2 and all("steps" in line and "tok/s" in line for line in said), said
    assert sorted(line.split("; run")[0].rsplit(", ", 1)[1] for line in said) == sorted(
        f"node {s['job']['node_rank']} of 2 (ranks {s['job']['ranks'][0]}-{s['job']['ranks'][1]} of 4)"
        for s in [
            json.loads((run_dirs(tmp_path / f"node{n}")[0] / "summary.json").read_text())
            for n in (0, 1)
        ]
    )

    # the two run directories as one run
    dirs = [run_dirs(tmp_path / f"node{n}")[0] for n in (0, 1)]
    per_node = [json.loads((d / "summary.json").read_text()) for d in dirs]
    steps = per_node[0]["steps"]
    assert [s["steps"] for s in per_node] == [steps, steps]  # DDP: the nodes step together
    for snap in per_node:  # each node: its own 2 ranks, steps x 2 ranks x 128 tokens
        assert snap["tokens_seen"] == steps * 2 * BATCH_TOKENS
        assert snap["job"]["nodes"] == 2 and snap["job"]["world_size"] == 4
        assert len(snap["job"]["ranks"]) == 2 and snap["job"]["run_id"] == JOB
    res = run_tm(["summary", str(dirs[0]), str(dirs[1]), "--json"], tmp_path, timeout=60)
    assert res.returncode == 0, res.stderr
    job = json.loads(res.stdout)
    assert job["job"]["world_size"] == 4 and job["job"]["ranks"] == [0, 1, 2, 3]
    assert job["job"]["run_id"] == JOB and job["job"]["nodes"] == 2
    assert job["tokens_seen"] == steps * 4 * BATCH_TOKENS
    assert job["steps"] == steps
    all_ranks = {r: v for s in per_node for r, v in s["ranks"]["step_time_s"].items()}
    assert job["ranks"]["slowest"] == max(all_ranks, key=all_ranks.get)
    assert job["n_gpus"]["value"] == 4  # the fake NVML shows two GPUs to each node
    # the slow node named across nodes: ranks 2 and 3 sleep 0.09 and 0.11 s a step, ranks 0
    # and 1 0.05 and 0.07 s; the node's compute is its fastest rank's, 0.04 s over the other's
    named = job["straggler"]
    assert (named["kind"], named["ranks"]) == ("node", [2, 3]), job.get("comm")
    assert named["extra_s"] == pytest.approx(0.04, rel=0.25)
    assert named["node"] == next(s["job"]["node_rank"] for s in per_node if 2 in s["job"]["ranks"])
    text = run_tm(["summary", str(dirs[0]), str(dirs[1])], tmp_path, timeout=60).stdout
    assert f"job {JOB}: 2 nodes of 2, 4 ranks, 4 GPUs" in text
    assert f"slowest rank {job['ranks']['slowest']}" in text
    assert f"node {named['node']} (ranks 2, 3) computes" in text
    assert "None" not in text and "?" not in text.split("absent:")[0]
