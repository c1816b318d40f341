"""Host (the process tree) and node series: rates from cumulative counters."""

from __future__ import annotations

import pytest

from .build import rec, run


def host(t, cpu_s, rss_kb=1000, procs=3):
    return rec(
        "sample.host",
        t,
        rank=None,
        src="tm",
        procs=procs,
        pids=[1, 2, 3],
        cpu_s=cpu_s,
        rss_kb=rss_kb,
    )


def node(t, read_b, rx_b, free_b=500e9):
    return rec(
        "sample.node",
        t,
        rank=None,
        src="tm",
        cpu={"user": 0.5, "system": 0.1, "iowait": 0.0, "steal": 0.0, "idle": 0.4},
        cores=16,
        load=[1.0, 2.0, 3.0],
        memory={"total_b": 64e9, "available_b": 32e9},
        disk={"path": "/data", "total_b": 1e12, "free_b": free_b},
        disk_io={"read_b": read_b, "write_b": 0},
        net={"rx_b": rx_b, "tx_b": 0},
        limits={"memory_b": 32e9, "cpu_cores": 8, "source": "cgroup v2"},
    )


def test_cores_busy_and_rss():
    # 10 -> 13 CPU s over 2 s = 1.5 cores; 1,000 kB = 1,024,000 B
    snap = run(host(1.0, 10.0), host(3.0, 13.0))
    assert snap["host"] == {"procs": 3, "rss_b": 1_024_000, "cpu_cores": pytest.approx(1.5)}


def test_a_fall_in_cumulative_cpu_is_not_a_negative_rate():
    # a child exited taking its CPU seconds: 13 -> 12 keeps the previous 1.5 cores
    snap = run(host(1.0, 10.0), host(3.0, 13.0), host(4.0, 12.0))
    assert snap["host"]["cpu_cores"] == pytest.approx(1.5)
    # and the next interval is measured from the new reading: 12 -> 14 over 1 s = 2 cores
    snap = run(host(1.0, 10.0), host(3.0, 13.0), host(4.0, 12.0), host(5.0, 14.0))
    assert snap["host"]["cpu_cores"] == pytest.approx(2.0)


def test_node_rates_and_fields():
    # read 0 -> 1e6 B over 2 s = 5e5 B/s; rx 1e6 -> 5e5 (a counter reset): no rate
    snap = run(node(1.0, 0, 1e6), node(3.0, 1e6, 5e5))
    n = snap["node"]
    assert n["rates_b_s"] == {"disk_io_read_b": 5e5, "disk_io_write_b": 0.0, "net_tx_b": 0.0}
    assert n["cores"] == 16 and n["load"] == [1.0, 2.0, 3.0]
    assert n["limits"]["cpu_cores"] == 8 and n["disk"]["path"] == "/data"
    assert n["cpu"]["user"] == 0.5


def test_node_busy_per_core_passes_through_and_a_bad_list_is_left_out() -> None:
    from trainmeter.engine.host_node import NodeSeries

    node = NodeSeries()
    node.sample(1.0, {"cores": 2, "cpu_per_core": [0.25, 1.0]})
    assert node.latest["cpu_per_core"] == [0.25, 1.0]
    node.sample(2.0, {"cores": 2, "cpu_per_core": [0.25, "busy"]})
    assert "cpu_per_core" not in node.latest


def test_the_node_entry_read_late_is_the_entry_read_at_once() -> None:
    """The node's entry is made from its latest sample when read: read after every sample or
    only at the end, the same entry, the same rates and the same disk trend (a counter that
    falls gives no rate for its interval; a sample without a disk keeps the trend)."""
    from trainmeter.engine.host_node import NodeSeries

    samples = [
        (1.0, node(1.0, 0.0, 0.0)),
        (2.0, node(2.0, 4e6, 1e6, free_b=499e9)),
        (3.0, node(3.0, 1e6, 3e6, free_b=498e9)),  # the disk counter fell
        (4.0, {"cores": 16, "cpu_per_core": [0.5, float("nan")], "load": [1.0]}),
        (5.0, node(5.0, 2e6, 5e6, free_b=497e9)),
    ]
    eager, late = NodeSeries(), NodeSeries()
    entries = []
    for t, record in samples:
        d = record.get("d", record)
        eager.sample(t, d)
        late.sample(t, d)
        entries.append(eager.section().values["node"])
    assert late.section().values["node"] == entries[-1]
    assert list(late.disk_trend) == list(eager.disk_trend) == [(1.0, 500e9), (2.0, 499e9),
                                                                (3.0, 498e9), (5.0, 497e9)]
    zero = {"disk_io_write_b": 0.0, "net_tx_b": 0.0}
    assert entries[1]["rates_b_s"] == {"disk_io_read_b": 4e6, "net_rx_b": 1e6, **zero}
    assert entries[2]["rates_b_s"] == {"net_rx_b": 2e6, **zero}
    assert "cpu_per_core" not in entries[3] and "disk" not in entries[3]
