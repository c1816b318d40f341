"""Helpers for the sources tests: fixtures of recorded (hand-written) NVML answers."""

from __future__ import annotations

import pytest

from trainmeter.sources.gpu.fake import FakeBackend
from trainmeter.sources.gpu.sampler import GpuSampler

from .nvml_testkit import Clock, fixture_path


@pytest.fixture
def make_sampler(tmp_path):
    """make_sampler("h100_sxm_gpm", gpus="0") -> (sampler, backend, clock)."""
    made = []

    def make(name: str, **kw):
        backend = FakeBackend(fixture_path(name))
        clock = kw.pop("clock", None) or Clock()
        kw.setdefault("env", {"TRAINMETER_PEAKS_DIR": str(tmp_path / "peaks")})
        kw.setdefault("process_names", lambda: ["python", "bash"])
        kw.setdefault("hostname", "testhost")
        sampler = GpuSampler(backend=backend, clock=clock, **kw)
        made.append(sampler)
        return sampler, backend, clock

    yield make
    for s in made:
        s.close()
