"""Fixtures for the tap tests: a real datagram socket standing in for `tm`, and clean taps."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.socket_collector import SocketCollector
from trainmeter.agent import outbox, taps
from trainmeter.agent import sender as sender_module

SRC = Path(__file__).resolve().parents[2] / "src" / "trainmeter"


class Collector(SocketCollector):
    """The shared socket stand-in, read in this process after a flush."""

    def metrics(self, via: str | None = None) -> list[dict]:
        return [
            r["d"]
            for r in self.records()
            if r["kind"] == "metric" and (via is None or r["d"]["via"] == via)
        ]


@pytest.fixture
def collector(monkeypatch: pytest.MonkeyPatch) -> Iterator[Collector]:
    """A bound socket, TRAINMETER_SOCKET pointing at it, and a fresh process sender."""
    col = Collector()
    monkeypatch.setenv(sender_module.SOCKET_ENV, col.path)
    monkeypatch.setattr(sender_module, "_sender", None)
    monkeypatch.setattr(sender_module, "_sender_checked", False)
    outbox.clear()  # nothing queued by an earlier test leaks into this one
    try:
        yield col
    finally:
        live = sender_module._sender
        if live is not None:
            live.go_quiet()  # stops its thread; the next test gets its own sender
        col.close()


@pytest.fixture(autouse=True)
def clean_taps() -> Iterator[None]:
    """Every test starts with no tracker wrapped and leaves none wrapped."""
    taps.uninstall_all()
    yield
    taps.uninstall_all()


class CudaLike:
    """A 0-dim "tensor" on a CUDA device. Any read of its value is logged with who read it, so a
    test can tell the tap's reads (code under src/trainmeter) from the tracker's own."""

    ndim = 0
    device = types.SimpleNamespace(type="cuda")
    shape = ()

    def __init__(self) -> None:
        self.readers: list[str] = []

    def _read(self) -> float:
        self.readers.append(sys._getframe(2).f_code.co_filename)
        return 1.0

    def __float__(self) -> float:
        return self._read()

    def item(self) -> float:
        return self._read()

    def detach(self) -> CudaLike:
        self.readers.append(sys._getframe(1).f_code.co_filename)
        return self

    def cpu(self) -> CudaLike:
        self.readers.append(sys._getframe(1).f_code.co_filename)
        return self

    def read_by_trainmeter(self) -> bool:
        return any(str(SRC) in name for name in self.readers)


@pytest.fixture
def cuda_like() -> type[CudaLike]:
    """The class, so a test can make as many as it needs."""
    return CudaLike
