"""The GPU counters' sample path (`counters_sample.py`) gives `GpuCounters.section`'s values for
readers that read none of the derived numbers: the same ladder, rows and OFU, every float equal,
on GPUs that come, go out of the covered set, lose fields, carry odd names or huge numbers; and
it answers for its floats: when it says every float is finite, every one is."""

from __future__ import annotations

import random
from typing import Any

from trainmeter.engine import counters_sample
from trainmeter.engine.counters import GpuCounters
from trainmeter.engine.finite import all_finite
from trainmeter.hardware import specs
from trainmeter.views.history import History

from . import build as b

NAMES: list[Any] = [b.H100, b.H100, "NVIDIA A100-SXM4-80GB", "Tesla T4", "unknown card", None,
                    7, float("nan")]
NUMBERS: list[Any] = [0.0, -0.0, 0.5, 0.9, 1.0, 1980, 1410, 2, 1e308, 1.7e308, float("inf"),
                      float("nan"), True, "0.5", None, 10**400]
FIELDS = ("gpu_util", "sm_active", "tensor_active", "dram_active", "sm_clock_mhz",
          "max_sm_clock_mhz", "power_w", "memory_used_b", "window_s", "temperature_c")


def _row(rng: random.Random, index: int) -> dict[str, Any]:
    fields = {k: rng.choice(NUMBERS) if rng.random() < 0.2 else rng.uniform(0.0, 2000.0)
              for k in FIELDS if rng.random() < 0.85}
    return b.gpu_row(index=index, name=rng.choice(NAMES) if rng.random() < 0.1 else b.H100,
                     **fields)


def test_the_values_are_the_sections_and_finite_when_it_says_so() -> None:
    said_finite = 0
    for run in range(150):
        rng = random.Random(run)
        counters = GpuCounters(specs.lookup)
        for i in range(40):
            move = rng.random()
            if move < 0.05:
                counters.sample(float(i), {"unavailable": "NVML not found"})
            elif move < 0.8:
                n = rng.randrange(1, 4)
                d: dict[str, Any] = {"gpus": [_row(rng, j) for j in rng.sample(range(4), n)],
                                     "selected_by": "process"}
                if rng.random() < 0.2:
                    d["gpm_unavailable"] = "no GPM"
                counters.sample(float(i), d)
            covered = rng.choice((None, [], ["GPU-0"], ["GPU-1", "GPU-0"], ["GPU-3", "x"]))
            mfu = rng.choice((None, {}, {"value": 0.4}, {"value": None}, {"value": 1e308},
                              {"value": float("inf")}))
            got, finite = counters_sample.sample(counters, covered, (mfu or {}).get("value"))
            want = counters.section(covered, mfu=mfu, mfu_reason=None, peak=None,
                                    peak_reason=None, detail=False, keys=History.reads).values
            assert repr(got) == repr(want), (run, i)
            if finite:
                said_finite += 1
                assert all_finite(got), (run, i)
    assert said_finite > 2000


def test_counters_that_overflow_are_the_snapshots() -> None:
    row = b.gpu_row(gpu_util=0.9, sm_active=1.7e308, tensor_active=1.7e308, sm_clock_mhz=1980,
                    max_sm_clock_mhz=1980, window_s=1.0)
    records = [b.start(0.0), b.hello(0.5)]  # no device fact: every sampled GPU is covered
    records += [b.step(1.0 + i, tokens=8192, n=i) for i in range(1, 8)]
    records += [b.gpu(3.0, row), b.gpu(4.0, row, b.gpu_row(1, sm_active=1.7e308))]
    engine = b.Engine()
    for record in records:
        engine.feed(record)
    snap = engine.snapshot(now=9.0)
    sample = engine.sample(now=9.0, keys=History.reads)
    assert sample["ladder"]["gpus"]["0"]["ofu"] is None  # the OFU overflowed
    assert sample["ladder"]["mean"]["sm_active"] is None  # the sum of two overflowed
    for key, value in sample.items():
        assert snap[key] == value, key
