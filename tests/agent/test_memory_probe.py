"""The memory probe's readings: replayed allocator answers, and the real thing on CPU."""

from __future__ import annotations

import torch

from trainmeter.agent.probes import memory


def test_the_fake_allocator_replays_its_answers_and_repeats_the_last() -> None:
    fake = memory.FakeAllocator([
        {"total_b": 100, "stats": {"reserved_bytes.all.current": 10, "num_alloc_retries": 0}},
        {"total_b": 100, "stats": {"reserved_bytes.all.current": 96, "num_alloc_retries": 2}},
    ])
    first, second, third = fake.read(), fake.read(), fake.read()
    assert first == ({"reserved_bytes.all.current": 10, "num_alloc_retries": 0}, 100)
    assert second == third == ({"reserved_bytes.all.current": 96, "num_alloc_retries": 2}, 100)


def test_a_cuda_answer_becomes_the_record_and_names_what_it_lacks() -> None:
    d = memory.cuda_payload({"allocated_bytes.all.current": 5, "reserved_bytes.all.current": 8,
                             "num_alloc_retries": 1}, 80, 2)
    assert d["device"] == "cuda" and d["index"] == 2
    assert (d["allocated_b"], d["reserved_b"], d["alloc_retries"], d["total_b"]) == (5, 8, 1, 80)
    assert d["missing"]["ooms"] == "the allocator gave no num_ooms"


def test_on_cpu_only_resident_memory_and_the_reasons_for_the_rest(monkeypatch) -> None:
    monkeypatch.setattr(memory, "_torch", torch)
    monkeypatch.setattr(memory, "_fake", None)
    big = torch.ones(64, 1024, 1024)  # 256 MiB touched: resident
    d = memory.read()
    assert d["device"] == "cpu"
    assert d["rss_b"] >= big.numel() * 4 and d["rss_peak_b"] >= d["rss_b"] * 0.9
    assert d["missing"]["allocated_b"] == memory.NO_ALLOCATOR
    assert "reserved_b" not in d and "alloc_retries" not in d
