"""The memory section, its alerts and its advice, from `memory` records worked by hand."""

from __future__ import annotations

from trainmeter.engine import Engine

GIB = 2**30


def _rec(t: float, rank: int, **d) -> dict:
    return {"v": 1, "t": t, "src": "agent", "rank": rank, "pid": 100 + (rank or 0), "kind": "memory", "d": d}


def _cuda(allocated, reserved, retries=0, peak=None, at_step=False, total=80 * GIB):
    return {
        "device": "cuda", "index": 0, "allocated_b": allocated, "allocated_peak_b": peak or allocated,
        "reserved_b": reserved, "reserved_peak_b": reserved, "alloc_retries": retries, "ooms": 0,
        "total_b": total, "at_step": at_step,
    }


def test_rows_peaks_and_shares_per_rank() -> None:
    e = Engine()
    e.feed(_rec(1.0, 0, **_cuda(10 * GIB, 20 * GIB, at_step=True)))
    e.feed(_rec(2.0, 0, **_cuda(30 * GIB, 40 * GIB, peak=50 * GIB)))
    e.feed(_rec(2.0, 1, **_cuda(5 * GIB, 8 * GIB, retries=2)))
    mem = e.snapshot()["memory"]
    r0 = mem["ranks"]["0"]
    assert r0["allocated_peak_b"] == 50 * GIB  # the allocator's peak beats any reading
    assert r0["reserved_peak_b"] == 40 * GIB
    assert r0["fragmentation_b"] == 10 * GIB and r0["fragmentation"] == 0.25  # (40-30)/40
    assert r0["reserved_share"] == 0.5  # 40 / 80
    assert r0["between_steps_b"] == 10 * GIB
    assert r0["transient_share"] == 0.8  # (50 - 10) / 50
    assert mem["reserved_peak_b"] == 40 * GIB and mem["total_b"] == 80 * GIB
    assert mem["alloc_retries"] == 2 and mem["device"] == "cuda"


def test_no_reading_is_absent_with_reason() -> None:
    snap = Engine().snapshot()
    assert "memory" not in snap and "memory" in snap["absent"]


def test_cpu_reading_keeps_the_reasons_of_what_is_missing() -> None:
    e = Engine()
    e.feed(_rec(1.0, 0, device="cpu", rss_b=300 * 2**20, rss_peak_b=400 * 2**20,
                missing={"allocated_b": "no caching allocator on this device"}))
    row = e.snapshot()["memory"]["ranks"]["0"]
    assert row["rss_peak_b"] == 400 * 2**20 and "allocated_b" not in row
    assert row["missing"]["allocated_b"] == "no caching allocator on this device"


def test_retries_rising_alerts_with_the_numbers_and_stops_after_the_window() -> None:
    e = Engine()
    e.feed(_rec(1.0, 3, **_cuda(10 * GIB, 20 * GIB, retries=0)))
    assert not [a for a in e.snapshot()["alerts"] if a["kind"].startswith("memory")]
    e.feed(_rec(2.0, 3, **_cuda(10 * GIB, 20 * GIB, retries=4)))
    (alert,) = [a for a in e.snapshot()["alerts"] if a["kind"] == "memory_retries"]
    assert alert["rank"] == 3 and alert["alloc_retries"] == 4 and alert["alloc_retries_before"] == 0
    assert alert["key"] == "memory_retries:3"
    e.feed(_rec(63.0, 3, **_cuda(10 * GIB, 20 * GIB, retries=4)))  # 61 s without a new retry
    assert not [a for a in e.snapshot()["alerts"] if a["kind"] == "memory_retries"]


def test_near_full_at_five_percent_of_the_card() -> None:
    e = Engine()
    e.feed(_rec(1.0, 0, **_cuda(70 * GIB, 75 * GIB)))  # 75/80 = 93.75%: not yet
    assert not [a for a in e.snapshot()["alerts"] if a["kind"] == "memory_near_full"]
    e.feed(_rec(2.0, 0, **_cuda(70 * GIB, 77 * GIB)))  # 77/80 = 96.25%
    (alert,) = [a for a in e.snapshot()["alerts"] if a["kind"] == "memory_near_full"]
    assert alert["reserved_share"] == 77 / 80 and alert["total_b"] == 80 * GIB


def test_advice_names_fragmentation_and_activations_only_when_memory_is_short() -> None:
    e = Engine()
    e.feed(_rec(1.0, 0, **_cuda(10 * GIB, 60 * GIB, at_step=True)))
    e.feed(_rec(2.0, 0, **_cuda(50 * GIB, 66 * GIB, peak=60 * GIB)))  # 66/80 < 95%: not short
    assert not [a for a in e.snapshot()["advice"] if a["kind"] in ("fragmentation", "activations")]
    e.feed(_rec(3.0, 0, **_cuda(57 * GIB, 77 * GIB, peak=60 * GIB)))
    advice = {a["kind"]: a for a in e.snapshot()["advice"]}
    frag = advice["fragmentation"]
    assert "expandable_segments" in frag["message"]
    assert frag["evidence"][0]["value"] == 20 / 77  # (77 - 57) / 77
    acts = advice["activations"]
    assert "checkpointing" in acts["message"]
    assert acts["evidence"][0]["value"] == 50 / 60  # (60 - 10) / 60


def test_a_launcher_without_a_rank_is_left_out_once_ranks_report() -> None:
    e = Engine()
    e.feed(_rec(1.0, None, device="cpu", rss_b=100))  # torchrun's own process
    assert list(e.snapshot()["memory"]["ranks"]) == ["0"]  # alone: the training process
    e.feed(_rec(1.0, 1, **_cuda(5 * GIB, 8 * GIB)))
    assert list(e.snapshot()["memory"]["ranks"]) == ["1"]
