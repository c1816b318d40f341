"""The Grafana dashboard (`grafana/trainmeter.json`) against what the exporter writes.

Every metric a panel queries is one the exporter writes, and every memory family it writes has
a panel. The memory panels' expressions are then evaluated by a real Prometheus scraping two
nodes' `/metrics` (hand-written snapshots, four ranks on 80 GiB cards), against values worked
out by hand. (`tests/integration/test_two_nodes.py` evaluates every panel on a real job.)
"""

from __future__ import annotations

import json
import re
import shutil
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from trainmeter.exporters.prometheus import FAMILIES, MEMORY, PREFIX, MetricsServer

from ..conftest import REPO, start_prometheus

DASHBOARD = json.loads((REPO / "grafana" / "trainmeter.json").read_text())
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
GIB, MIB = 2**30, 2**20
JOB = "memjob"


def _exprs(panel: dict) -> list[str]:
    return [t["expr"] for t in panel["targets"]]


def _written() -> set[str]:
    """Every sample name the exporter can write: counters end in `_total`."""
    return {PREFIX + f.name + ("_total" if f.kind == "counter" else "") for f in FAMILIES}


def test_every_panel_queries_a_metric_the_exporter_writes() -> None:
    written = _written()
    for panel in DASHBOARD["panels"]:
        for expr in _exprs(panel):
            for name in re.findall(r"trainmeter_[a-z_]+", expr):
                assert name in written, f"panel {panel['title']!r} queries {name}, never written"


def test_every_memory_family_has_a_panel() -> None:
    queried = {
        n
        for p in DASHBOARD["panels"]
        for e in _exprs(p)
        for n in re.findall(r"trainmeter_[a-z_]+", e)
    }
    for _field, name, _doc in MEMORY:
        assert PREFIX + name in queried, f"no panel shows {PREFIX + name}"
    ids = [p["id"] for p in DASHBOARD["panels"]]
    assert len(ids) == len(set(ids))  # Grafana keys panels by id
    for p in DASHBOARD["panels"]:  # no two panels on one spot
        others = [q for q in DASHBOARD["panels"] if q is not p]
        g = p["gridPos"]
        for q in others:
            h = q["gridPos"]
            overlap = (
                g["x"] < h["x"] + h["w"]
                and h["x"] < g["x"] + g["w"]
                and g["y"] < h["y"] + h["h"]
                and h["y"] < g["y"] + g["h"]
            )
            assert not overlap, (p["title"], q["title"])


def _row(
    index: int, reserved: float, allocated: float, peak: float, retries: int, ooms: int, rss: float
) -> dict:
    return {"device": "cuda", "index": index, "reserved_b": reserved, "allocated_b": allocated,
            "reserved_peak_b": peak, "allocated_peak_b": allocated * 1.1, "total_b": 80 * GIB,
            "alloc_retries": retries, "ooms": ooms, "rss_b": rss}


def _snap(node: int, rows: dict[str, dict]) -> dict:
    ranks = [int(r) for r in rows]
    job = {"run_id": JOB, "node_rank": node, "nodes": 2, "world_size": 4, "ranks": ranks,
           "clock_rank": ranks[0]}
    return {"steps": 10, "job": job, "memory": {"ranks": rows}}


NODES = {
    0: {"0": _row(0, 40 * GIB, 30 * GIB, 44 * GIB, 1, 0, 2 * GIB),
        "1": _row(1, 60 * GIB, 50 * GIB, 64 * GIB, 0, 0, 3 * GIB)},
    1: {"2": _row(0, 20 * GIB, 10 * GIB, 24 * GIB, 3, 1, 1 * GIB),
        "3": _row(1, 70 * GIB, 66 * GIB, 75 * GIB, 2, 0, 512 * MIB)},
}


def _promql(port: int, expr: str) -> list[dict]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            body = json.loads(resp.read())
    except urllib.error.HTTPError as exc:  # a bad expression: 400 with the parser's message
        raise AssertionError(f"{expr}: {exc.read().decode()}") from None
    assert body["status"] == "success", (expr, body)
    return body["data"]["result"]


@pytest.mark.slow
def test_memory_panels_evaluate_to_hand_worked_values(tmp_path: Path) -> None:
    if not Path(PROMETHEUS).exists():
        pytest.skip("prometheus is not installed (apt-get install prometheus)")
    servers = []
    for node, rows in NODES.items():
        server = MetricsServer(("127.0.0.1", 0), None)
        server.on_snapshot(_snap(node, rows), 0.0)
        servers.append(server)
    targets = ", ".join(f"'127.0.0.1:{s.address[1]}'" for s in servers)
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n  - job_name: trainmeter\n    static_configs:\n"
        f"      - targets: [{targets}]\n"
    )
    prom, port = start_prometheus(PROMETHEUS, config, tmp_path / "tsdb", tmp_path / "prometheus.log")
    try:
        count = f'count(trainmeter_memory_reserved_bytes{{run="{JOB}"}})'
        deadline = time.monotonic() + 60
        while True:
            try:
                got = _promql(port, count)
                if got and got[0]["value"][1] == "4":
                    break
            except (OSError, AssertionError):
                pass
            assert time.monotonic() < deadline, "prometheus never scraped both nodes"
            time.sleep(0.3)

        def by_rank(expr: str) -> dict[str, float]:
            return {
                r["metric"]["rank"]: float(r["value"][1])
                for r in _promql(port, expr.replace("$run", JOB))
            }

        def whole(expr: str) -> float:
            [r] = _promql(port, expr.replace("$run", JOB))
            return float(r["value"][1])

        memory = [p for p in DASHBOARD["panels"] if any("memory_" in e for e in _exprs(p))]
        assert len(memory) >= 4
        share = next(p for p in memory if p["fieldConfig"]["defaults"]["unit"] == "percentunit")
        # reserved / card: 40/80, 60/80, 20/80, 70/80
        assert by_rank(_exprs(share)[0]) == {"0": 0.5, "1": 0.75, "2": 0.25, "3": 0.875}
        found = {}
        for p in memory:
            for e in _exprs(p):
                result = _promql(port, e.replace("$run", JOB))
                assert result, f"no data for {p['title']!r}: {e}"
                found[e] = result
        rss = next(e for e in found if "rss" in e)
        assert by_rank(rss) == {"0": 2 * GIB, "1": 3 * GIB, "2": 1 * GIB, "3": 512 * MIB}
        retries = next(e for e in found if "alloc_retries" in e)
        ooms = next(e for e in found if "ooms" in e)
        assert whole(retries) == 1 + 0 + 3 + 2 and whole(ooms) == 1  # summed over the job
        peak = next(e for e in found if "reserved_peak" in e)
        assert whole(peak) == 75 * GIB  # rank 3's, the fullest
    finally:
        prom.terminate()
        prom.wait(timeout=30)
        for s in servers:
            s.close()
