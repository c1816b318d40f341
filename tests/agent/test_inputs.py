"""Input files are read with a bound (issue 29, item 11): `/dev/zero`, a FIFO or a runaway file
is a one-line refusal, never a read without end inside the training process or `tm`."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from trainmeter.agent import inputs
from trainmeter.agent.probes import memory


def test_dev_zero_is_refused_after_one_byte_past_the_bound() -> None:
    started = time.monotonic()
    with pytest.raises(inputs.InputTooLarge, match=r"/dev/zero is larger than 1 MiB"):
        inputs.read_bytes("/dev/zero", inputs.MIB, "test file")
    assert time.monotonic() - started < 5


def test_a_file_at_the_bound_is_read_and_one_byte_more_is_not(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 1000)
    assert inputs.read_bytes(path, 1000) == b"x" * 1000
    with pytest.raises(inputs.InputTooLarge, match="larger than 999 bytes"):
        inputs.read_bytes(path, 999)
    assert inputs.load_json(_json(tmp_path, [1, 2]), 100) == [1, 2]


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    started = time.monotonic()
    with pytest.raises(inputs.InputTooLarge, match="not a regular file"):
        inputs.read_bytes(fifo, 100)
    assert time.monotonic() - started < 5


def test_the_fake_cuda_memory_file_is_bounded_and_checked() -> None:
    with pytest.raises(inputs.InputTooLarge, match="TRAINMETER_FAKE_CUDA_MEMORY /dev/zero"):
        memory.FakeAllocator.from_file("/dev/zero")


def test_a_fake_cuda_memory_file_that_is_not_a_list_is_a_reason(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a JSON list of objects"):
        memory.FakeAllocator.from_file(str(_json(tmp_path, {"stats": {}})))


def test_the_rss_peak_is_never_below_a_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel updates ru_maxrss lazily: right after memory grew it reports less than statm.
    Worked by hand: statm says 5000 pages resident, ru_maxrss 1 KiB, so the peak is the reading."""

    class Usage:
        ru_maxrss = 1  # KiB: far below what is resident

    monkeypatch.setattr(memory.resource, "getrusage", lambda who: Usage)
    monkeypatch.setattr(memory, "_rss_peak", 0)
    now, peak = memory.rss()
    assert now is not None and peak is not None
    assert peak >= now > 1024
    first = peak
    _, peak = memory.rss()
    assert peak >= first  # a peak never goes down between readings


def _json(tmp_path: Path, value: object) -> Path:
    import json

    path = tmp_path / "value.json"
    path.write_text(json.dumps(value))
    return path
