"""The Prometheus exposition of a snapshot, and the /metrics-only server behind --metrics-addr."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from trainmeter.exporters.prometheus import MetricsServer, labels_for, render

SNAP = {
    "steps": 40,
    "tokens_seen": 40 * 256.0,
    "tokens_per_s": 2048.0,
    "step_time_s": 0.125,
    "mfu": {
        "convention": "megatron",
        "value": 0.38,
        "n_gpus": 2,
        "by_convention": {"hf": 0.36, "megatron": 0.38},
    },
    "n_gpus": {"value": 2, "source": "detected"},
    "ladder": {"gpus": {"0": {"gpu_util": 0.98, "sm_active": 0.9, "mfu": 0.38}}},
    "time": {"elapsed_s": 10.0, "goodput": 0.75},
    "energy": {"joules": 1403.0, "per_gpu": {"0": 1267.0, "1": 136.0}},
    "ranks": {"step_time_s": {"2": 0.125, "3": 0.14}, "slowest": "3"},
    "alerts": [{"kind": "gpu_throttle"}, {"kind": "gpu_throttle"}, {"kind": "straggler"}],
    "job": {
        "run_id": "job7",
        "node_rank": 1,
        "nodes": 2,
        "world_size": 4,
        "ranks": [2, 3],
        "clock_rank": 2,
    },
    "absent": {"progress": "no budget declared"},
}


def parse(body: bytes) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def test_render_labels_every_sample_with_run_and_node_and_leaves_absent_out():
    body, ctype = render(SNAP)
    assert ctype.startswith("text/plain")
    m = parse(body)
    for samples in m.values():
        for labels, _ in samples:
            assert labels["run"] == "job7" and labels["node"] == "1"
    assert m["trainmeter_tokens_per_second"][0][1] == 2048.0
    assert m["trainmeter_tokens_total"][0][1] == 10240.0  # 40 steps x 256
    assert m["trainmeter_step_time_seconds"][0][1] == 0.125
    assert m["trainmeter_mfu_ratio"] == [
        ({"run": "job7", "node": "1", "convention": "megatron"}, 0.38)
    ]
    assert len(m["trainmeter_mfu_by_convention_ratio"]) == 2
    rungs = {lab["rung"]: v for lab, v in m["trainmeter_gpu_ladder_ratio"]}
    assert rungs == {"gpu_util": 0.98, "sm_active": 0.9, "mfu": 0.38}  # absent rungs left out
    assert {lab["rank"]: v for lab, v in m["trainmeter_rank_step_time_seconds"]} == {
        "2": 0.125,
        "3": 0.14,
    }
    assert m["trainmeter_alerts"][0][1] == 3
    assert {lab["kind"]: v for lab, v in m["trainmeter_alert"]} == {
        "gpu_throttle": 2,
        "straggler": 1,
    }
    assert m["trainmeter_goodput_ratio"][0][1] == 0.75
    assert m["trainmeter_energy_joules_total"][0][1] == 1403.0
    assert {lab["gpu"]: v for lab, v in m["trainmeter_gpu_energy_joules_total"]} == {
        "0": 1267.0,
        "1": 136.0,
    }
    assert "trainmeter_progress_ratio" not in m  # absent is never exported as 0
    assert "trainmeter_ofu_ratio" not in m


def test_without_a_run_id_each_node_is_its_own_run():
    snap = {"steps": 3, "job": {"run_id": None, "node_rank": 0}}
    assert labels_for(snap, "20261202-120000-train") == {
        "run": "20261202-120000-train",
        "node": "0",
    }
    standalone = {"job": {"run_id": "9f1c-uuid", "run_id_source": "launcher", "nodes": 1}}
    assert labels_for(standalone, "20261202-120000-train")["run"] == "20261202-120000-train"
    standalone["job"]["nodes"] = 2  # a rendezvous id shared by two nodes is the job's
    assert labels_for(standalone, "20261202-120000-train")["run"] == "9f1c-uuid"
    m = parse(render(snap, {"run": "r", "cluster": "c1"})[0])  # as the dashboard calls it
    assert m["trainmeter_steps_total"] == [({"run": "r", "node": "0", "cluster": "c1"}, 3.0)]
    shared = parse(render(SNAP, {"run": "train"})[0])  # the job's id wins over the run's name
    assert shared["trainmeter_steps_total"][0][0] == {"run": "job7", "node": "1"}


def test_the_server_answers_metrics_alone_and_is_read_only():
    server = MetricsServer(("127.0.0.1", 0), None)
    port = server.address[1]
    try:
        server.on_snapshot(SNAP, 1.0)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            assert parse(resp.read())["trainmeter_steps_total"][0][1] == 40
        for path, method, code in (
            ("/", "GET", 404),
            ("/api", "GET", 404),
            ("/metrics", "POST", 405),
        ):
            req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method, data=b"")
            with pytest.raises(urllib.error.HTTPError) as err:
                urllib.request.urlopen(req, timeout=5)
            assert err.value.code == code
    finally:
        server.on_finish(SNAP)  # stops serving with the run
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2)


def test_an_address_in_use_is_one_warning_and_the_run_goes_on(tmp_path):
    import socket

    from trainmeter.supervisor.options import RunOptions
    from trainmeter.views.observers import make_observers

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    opts = RunOptions()
    opts.metrics_addr = ("127.0.0.1", taken.getsockname()[1])
    said: list[tuple[str, str]] = []
    try:
        observers = make_observers(opts, tmp_path, lambda key, msg=None: said.append((key, msg)))
    finally:
        taken.close()
    assert not [o for o in observers if getattr(o, "name", "") == "metrics"]
    assert [k for k, _ in said] == ["metrics"] and "is not served" in said[0][1]


def test_what_only_grows_is_a_counter_and_the_rest_gauges():
    """Steps, tokens and energy only grow: counters (`_total`), so `rate()` reads them; the
    families follow the one table (`FAMILIES`), help text and kind included."""
    from trainmeter.exporters.prometheus import FAMILIES

    kinds = {f.name: f.type for f in text_string_to_metric_families(render(SNAP)[0].decode())}
    counters = {"trainmeter_steps", "trainmeter_tokens", "trainmeter_energy_joules",
                "trainmeter_gpu_energy_joules"}
    assert {name for name, kind in kinds.items() if kind == "counter"} == counters
    assert set(kinds.values()) == {"counter", "gauge"}
    assert list(kinds) == ["trainmeter_" + f.name for f in FAMILIES if "trainmeter_" + f.name in kinds]
    body = render(SNAP)[0].decode()
    assert "trainmeter_steps_total{" in body
    assert "trainmeter_steps{" not in body


def test_each_ranks_compute_and_wait_and_the_straggler_per_rank():
    snap = {
        **SNAP,
        "comm": {"ranks": {
            "2": {"compute_s": 0.02, "wait_s": 0.08, "wait_total_s": 3.5},
            "3": {"compute_s": 0.08, "wait_s": 0.02, "wait_total_s": 0.9},
        }},
        "straggler": {"kind": "rank", "rank": 3, "ranks": [3], "extra_s": 0.06},
    }
    got = parse(render(snap)[0])
    by_rank = {name: {s[0]["rank"]: s[1] for s in got[name]} for name in (
        "trainmeter_rank_compute_per_step_seconds", "trainmeter_rank_wait_per_step_seconds",
        "trainmeter_rank_waited_seconds_total", "trainmeter_straggler_extra_seconds")}
    assert by_rank["trainmeter_rank_compute_per_step_seconds"] == {"2": 0.02, "3": 0.08}
    assert by_rank["trainmeter_rank_wait_per_step_seconds"] == {"2": 0.08, "3": 0.02}
    assert by_rank["trainmeter_rank_waited_seconds_total"] == {"2": 3.5, "3": 0.9}
    # the slow rank's extra compute, 0 on the other: a graph shows who holds the job, and when
    assert by_rank["trainmeter_straggler_extra_seconds"] == {"2": 0.0, "3": 0.06}
    # no rank reported its waits: no sample at all (absent, never zero)
    assert "trainmeter_rank_wait_per_step_seconds" not in parse(render(SNAP)[0])
