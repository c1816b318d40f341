"""The memory probe's readings: replayed allocator answers, and the real thing on CPU."""

from __future__ import annotations

import os
import time

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


def _due(monkeypatch, fake) -> list[tuple[str, dict]]:
    """The probe as attached in this process, a reading due, its records caught."""
    sent: list[tuple[str, dict]] = []
    sender = type("S", (), {"send": lambda self, kind, d, t=None: sent.append((kind, d))})()
    monkeypatch.setattr(memory, "get_sender", lambda: sender)
    monkeypatch.setattr(memory, "_torch", torch)
    monkeypatch.setattr(memory, "_fake", fake)
    monkeypatch.setattr(memory, "_attached_pid", os.getpid())
    monkeypatch.setattr(memory, "_last_read", time.monotonic() - memory.INTERVAL_S - 0.01)
    monkeypatch.setattr(memory, "_last_sent", None)
    monkeypatch.setattr(memory, "_taken", None)
    monkeypatch.setattr(memory.steps, "step_listeners", [])
    return sent


def test_a_cpu_reading_is_the_sender_threads_and_no_step_carries_it(monkeypatch) -> None:
    """No device allocator: the reading (the RSS) is taken on the sender's clock, and the
    training thread's steps carry no listener of this probe."""
    sent = _due(monkeypatch, None)
    memory._drain()
    assert memory.steps.step_listeners == []
    [(kind, d)] = sent
    assert kind == "memory" and d["device"] == "cpu" and d["at_step"] is False


def test_an_allocators_reading_is_taken_at_the_next_step_and_shipped_by_the_sender(
    monkeypatch,
) -> None:
    """With an allocator, the sender thread arms a one-shot listener; the next step reads
    (the bytes that live between steps) and the sender's next tick ships it."""
    fake = memory.FakeAllocator([{"total_b": 100, "stats": {"allocated_bytes.all.current": 7}}])
    sent = _due(monkeypatch, fake)
    memory._drain()
    assert memory.steps.step_listeners == [memory._on_step] and sent == []
    memory._on_step(5)  # the step: reads, and takes itself off
    assert memory.steps.step_listeners == [] and sent == []
    memory._drain()
    [(kind, d)] = sent
    assert d["allocated_b"] == 7 and d["at_step"] is True
