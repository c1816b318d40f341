"""Memory and the cause of death where people read them: the end line, `tm summary`, the
passport, Prometheus and the export columns, from an engine fed records worked by hand."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from trainmeter.engine import Engine
from trainmeter.exporters.prometheus import render
from trainmeter.exporters.tables import DERIVED
from trainmeter.snapread import get_number
from trainmeter.views.passport import build_passport
from trainmeter.views.passport_md import render_markdown
from trainmeter.views.terminal import summary_line
from trainmeter.views.terminal_summary import render_plain

GIB = 2**30


def _snap() -> dict:
    e = Engine()
    e.feed({"v": 1, "t": 0.0, "src": "tm", "rank": None, "pid": 1, "kind": "run.start",
            "d": {"name": "tiny"}})
    for rank, reserved in ((0, 40), (1, 77)):
        e.feed({"v": 1, "t": 1.0, "src": "agent", "rank": rank, "pid": 10 + rank, "kind": "memory",
                "d": {"device": "cuda", "index": rank, "allocated_b": 30 * GIB,
                      "allocated_peak_b": 35 * GIB, "reserved_b": reserved * GIB,
                      "reserved_peak_b": reserved * GIB, "alloc_retries": rank, "ooms": 0,
                      "total_b": 80 * GIB}})
    e.feed({"v": 1, "t": 2.0, "src": "agent", "rank": 1, "pid": 11, "kind": "crash",
            "d": {"type": "torch.OutOfMemoryError",
                  "message": "CUDA out of memory. Tried to allocate 2.00 GiB."}})
    e.feed({"v": 1, "t": 3.0, "src": "tm", "rank": None, "pid": 1, "kind": "run.end",
            "d": {"exit_status": 1, "signal": None, "elapsed_s": 3.0}})
    return e.snapshot()


def test_the_end_line_leads_with_the_cause_and_carries_the_peak() -> None:
    line = summary_line(_snap(), "/runs/x")
    assert line.startswith("trainmeter: crashed: CUDA out of memory (rank 1); ")
    assert "mem peak 77.0 GiB of 80.0 GiB" in line


def test_tm_summary_has_a_memory_line_a_rank() -> None:
    text = render_plain(_snap(), None, width=200)
    assert "rank 1 cuda:1: allocated 30.0 GiB (peak 35.0 GiB), reserved 77.0 GiB of " \
           "80.0 GiB (96.3%), peak 77.0 GiB" in text
    assert "crashed: CUDA out of memory (rank 1)" in text.splitlines()[0]


def test_the_passport_has_the_peak_per_gpu_and_the_cause() -> None:
    passport = build_passport(_snap())
    assert passport["run"]["status"] == "crashed: CUDA out of memory (rank 1)"
    peaks = {row["rank"]: row["reserved_peak_b"] for row in passport["memory"]}
    assert peaks == {"0": 40 * GIB, "1": 77 * GIB}
    assert "| Peak memory, rank 1 cuda:1 | 77.0 GiB reserved, 35.0 GiB allocated, of 80.0 GiB |" \
        in render_markdown(passport)


def test_prometheus_has_memory_per_rank() -> None:
    body, _ = render(_snap(), {"run": "r", "node": "0"})
    samples = {
        (s.name, s.labels.get("rank")): s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
    }
    assert samples[("trainmeter_memory_reserved_bytes", "1")] == 77 * GIB
    assert samples[("trainmeter_memory_total_bytes", "0")] == 80 * GIB
    assert samples[("trainmeter_memory_alloc_retries", "1")] == 1


def test_export_columns_read_the_peaks() -> None:
    snap = _snap()
    assert get_number(snap, DERIVED["memory_reserved_peak_b"]) == 77 * GIB
    assert get_number(snap, DERIVED["memory_alloc_retries"]) == 1  # 0 + 1 over the ranks


def test_memory_alerts_carry_their_numbers_in_words() -> None:
    text = render_plain(_snap(), None, width=300)
    assert ("rank 1 (GPU 1): reserved memory is within 5% of the card's total: an out-of-memory "
            "error may follow (reserved 77.0 GiB of 80.0 GiB, 96.3%)") in text
