"""Alerts: each raised from hand-built records, and not raised below its threshold."""

from __future__ import annotations

import pytest

from .build import device, end, gpu, gpu_row, hello, phase, rec, run, start, step, steps
from .test_budget import SHAPE
from .test_counters import h100_row


def kinds(snap):
    return [a["kind"] for a in snap["alerts"]]


def starving(wait_s, probes=("steps", "dataloader")):
    # a step every second from t=1 to t=21, and `wait_s` of loader wait in each second
    recs = [start(0.0), hello(0.1, probes=probes)]
    for i in range(21):
        if i:
            recs.append(phase(1.0 + i - 0.01, "data", wait_s))
        recs.append(step(1.0 + i, tokens=100))
    return recs


def test_data_starvation():
    snap = run(starving(0.5))
    (alert,) = snap["alerts"]
    # 20 s window, 0.5 s waited in each second: share 0.5 > 0.25
    assert alert["kind"] == "data_starvation"
    assert alert["data_share"] == pytest.approx(0.5)
    assert alert["window_s"] == pytest.approx(20.0)
    assert alert["t"] == 21.0
    assert kinds(run(starving(0.1))) == []  # 10% waiting is not starving
    assert kinds(run(starving(0.5, probes=("steps",)))) == []  # loader probe never attached


def test_gpu_throttle():
    snap = run(
        gpu(
            5.0,
            gpu_row(0, throttle=["sw_power_cap", "hw_thermal_slowdown"]),
            gpu_row(1, throttle=["gpu_idle"]),
        )
    )
    (alert,) = snap["alerts"]
    assert (alert["kind"], alert["gpu"], alert["t"]) == ("gpu_throttle", "0", 5.0)
    assert alert["reasons"] == ["sw_power_cap", "hw_thermal_slowdown"]
    # a later sample without reasons clears it
    assert (
        kinds(
            run(
                gpu(5.0, gpu_row(0, throttle=["hw_thermal_slowdown"])),
                gpu(6.0, gpu_row(0, throttle=[])),
            )
        )
        == []
    )


def test_step_times_alone_raise_no_straggler():
    # rank 0 steps every 1.0 s, rank 1 every 1.3 s: a 30% spread of step times, as a loaded
    # machine gives one rank for a while. Step times cannot say which rank the others wait
    # for (in a synchronous job they are equal): only the compute/wait split names one
    # (tests/engine/test_stragglers.py)
    base = [start(0.0), hello(0.1, world_size=2)]
    snap = run(base, steps(1.0, 1.0, 8, 100), steps(1.0, 1.3, 8, 100, rank=1))
    assert kinds(snap) == []
    assert snap["ranks"]["slowest"] == "1" and snap["ranks"]["fastest"] == "0"
    assert snap["ranks"]["spread"] == pytest.approx(0.3)


def node(t, free_b):
    return rec(
        "sample.node",
        t,
        rank=None,
        src="tm",
        disk={"path": "/ckpt", "total_b": 1e12, "free_b": free_b},
    )


def test_disk_filling():
    # 100 GB free at t=0, 40 GB at t=120: losing 0.5 GB/s, full in 40e9 / 0.5e9 = 80 s < 1 h
    snap = run(node(0.0, 100e9), node(60.0, 70e9), node(120.0, 40e9))
    (alert,) = snap["alerts"]
    assert alert["kind"] == "disk_filling" and alert["path"] == "/ckpt"
    assert alert["fill_rate_b_s"] == pytest.approx(0.5e9)
    assert alert["full_in_s"] == pytest.approx(80.0)
    # 1 GB in 2 min of 400 GB free: 8.3 MB/s, 13 h to fill: no alert
    assert kinds(run(node(0.0, 401e9), node(120.0, 400e9))) == []


def test_stuck_needs_now_and_an_unfinished_run():
    # steps every 1 s until t=10; the usual interval is 1 s so the limit is max(10 x 1, 60) = 60 s
    recs = [start(0.0), steps(1.0, 1.0, 10, 100)]
    assert kinds(run(recs)) == []  # no `now`: a replay never calls a run stuck
    assert kinds(run(recs, now=50.0)) == []  # 40 s silent
    snap = run(recs, now=100.0)  # 90 s silent
    (alert,) = snap["alerts"]
    assert alert["kind"] == "stuck" and alert["since_last_step_s"] == pytest.approx(90.0)
    assert kinds(run(recs, end(11.0), now=100.0)) == []  # finished runs are not stuck


def test_mfu_impossible():
    # 1 H100 at 10,000 tok/s with a declared 2e11 FLOP/token: 2e15 / 989.5e12 = 2.02 > 1
    over = run(start(0.0, flops_per_token=2e11), device(0.2), steps(1.0, 1.0, 6, 10_000))
    assert kinds(over) == ["mfu_impossible"] and over["alerts"][0]["mfu"] > 1
    # MFU 0.4 x ... : 39,580 tok/s x 1e10 / 989.5e12 = 0.4 while OFU is 0.2 (+0.05 margin)
    low_ofu = h100_row(tensor_active=0.25)  # 0.25 x 1464 / 1830 = 0.2
    snap = run(
        start(0.0, flops_per_token=1e10), device(0.2), steps(1.0, 1.0, 6, 39_580), gpu(3.0, low_ofu)
    )
    assert kinds(snap) == ["mfu_impossible"]
    assert snap["alerts"][0]["ofu"] == pytest.approx(0.2)
    fine = run(
        start(0.0, **SHAPE, convention="hf"),
        device(0.2),
        steps(1.0, 1.0, 6, 10_000),
        gpu(3.0, h100_row()),
    )
    assert kinds(fine) == []


def test_alert_messages_hold_no_changing_numbers():
    """The supervisor logs an alert once per (kind, message): the message must not drift."""
    recs = [start(0.0), steps(1.0, 1.0, 10, 100)]
    a, b = run(recs, now=100.0)["alerts"][0], run(recs, now=200.0)["alerts"][0]
    assert a["message"] == b["message"] and a["since_last_step_s"] != b["since_last_step_s"]
