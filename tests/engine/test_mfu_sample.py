"""MFU's sample path (`mfu_sample.py`) gives `mfu.section`'s values, the same floats in the same
order, whatever moved since the call before (the FLOPs per token entry, the peak, the GPU count,
the shape, the convention registry, the precision, tokens/s), and answers for its floats: when
it says every float is finite, every one is."""

from __future__ import annotations

import random
from typing import Any

from trainmeter.engine import flops, mfu
from trainmeter.engine.finite import all_finite
from trainmeter.engine.flops import Convention, ModelShape
from trainmeter.engine.mfu_sample import MfuSampler

SHAPES = [None, ModelShape(124_000_000, 38_000_000, 12, 768, 1024),
          ModelShape(7_000_000_000, 131_000_000, 32, 4096, 4096)]
PEAKS: list[dict[str, Any]] = [
    {"name": "H100", "label": "datasheet", "source": "spec", "bf16_dense_flops": 989.5e12,
     "other_precisions": {"fp8": {"flops": 1979e12, "source": "spec fp8"}}},
    {"name": "declared peak", "label": "declared", "source": "--peak-tflops",
     "bf16_dense_flops": 5e14},
    {"name": "huge", "label": "declared", "source": "x", "bf16_dense_flops": 1e-300,
     "other_precisions": {"tf32": {"flops": 1e-300, "source": "x"}}},
]
FPTS: list[dict[str, Any] | None] = [
    None,
    {"value": None, "convention": "not chosen", "source": "detected", "range": [5.16e8, 8.5e8]},
    {"value": 5.7e8, "convention": "megatron", "source": "detected"},
    {"value": 1e300, "convention": "megatron", "source": "declared"},
    {"value": 6.3e8, "convention": "titan", "source": "detected"},
]
PRECISIONS = [None, ("bf16", "torch"), ("fp8", "te"), ("tf32", "torch"), ("high", "torch")]


def test_the_values_are_the_sections_and_finite_when_it_says_so() -> None:
    rng = random.Random(7)
    sampler = MfuSampler()
    inputs: dict[str, Any] = {"fpt": FPTS[2], "peak": PEAKS[0], "n": 1, "shape": SHAPES[1],
                              "precision": None}
    said_finite = 0
    registered = False
    for i in range(4000):
        move = rng.randrange(9)  # one input moves at a time, or none (tokens/s alone)
        if move == 8 and inputs["fpt"] and inputs["fpt"]["value"] is not None:
            # the same entry, its value taken out in place (as `finite_only` does)
            inputs["fpt"].update(value=None, range=[1e8, 2e8])
        elif move == 0:
            inputs["fpt"] = dict(rng.choice(FPTS) or {}) or None  # a new object, maybe equal
        elif move == 1:
            inputs["peak"] = rng.choice(PEAKS)
        elif move == 2:
            inputs["n"] = rng.choice((None, 0, 1, 2, 8))
        elif move == 3:
            inputs["shape"] = rng.choice(SHAPES)
        elif move == 4:
            inputs["precision"] = rng.choice(PRECISIONS)
        elif move == 5:
            if registered:
                flops.unregister("sample_twice")
            else:
                flops.register(Convention(
                    "sample_twice", formula="2·6·N", source="this test", counts="twice",
                    per_token=lambda s: 2 * flops.flops_per_token(s, "all_params"),
                    expression=lambda s: "2N",
                ))
            registered = not registered
        tps = rng.choice((None, 0.0, 81920.0, 163840.5, 1e300, rng.uniform(1.0, 1e6)))
        try:
            got, finite = sampler.sample(inputs["fpt"], tps, inputs["peak"], inputs["n"],
                                         inputs["shape"], inputs["precision"])
            want = mfu.section(
                flops_per_token=inputs["fpt"], flops_reason="r", tokens_per_s=tps,
                tokens_reason="r", peak=inputs["peak"], peak_reason="r", n_gpus=inputs["n"],
                n_gpus_source="detected", shape=inputs["shape"], precision=inputs["precision"],
                detail=False,
            ).values
        finally:
            if registered and i == 3999:
                flops.unregister("sample_twice")
        assert repr(got) == repr(want), (i, move)
        if finite:
            said_finite += 1
            assert all_finite(got), i
        else:
            assert not all_finite(got) or any(
                v > 1e307 for v in _floats(got)
            ), i  # only a real infinity, or a sum of large finite ones, says so
    assert said_finite > 1000


def _floats(obj: Any) -> list[float]:
    if isinstance(obj, dict):
        return [f for v in obj.values() for f in _floats(v)]
    if isinstance(obj, list):
        return [f for v in obj for f in _floats(v)]
    return [abs(obj)] if isinstance(obj, float) else []


def test_an_mfu_that_overflows_is_the_snapshots() -> None:
    from trainmeter.views.history import History

    from . import build as b

    records = [b.start(0.0), b.hello(0.5), b.device(0.6),
               b.fact(0.7, "n_params", 124_000_000), b.fact(0.7, "seq_len", 1024),
               b.fact(0.7, "n_layers", 12), b.fact(0.7, "d_model", 768),
               b.fact(0.7, "n_embedding_params", 38_000_000),
               b.fact(0.7, "peak_flops", 1e-300, "declared")]
    records += [b.step(1.0 + i, tokens=8192, n=i) for i in range(1, 8)]
    engine = b.Engine()
    for record in records:
        engine.feed(record)
    snap = engine.snapshot(now=9.0)
    for keys in (History.reads, None):
        sample = engine.sample(now=9.0, keys=keys)
        assert sample["mfu"]["range"] == [None, None]  # each quotient overflowed
        assert set(sample["mfu"]["by_convention"].values()) == {None}
        for key, value in sample.items():
            assert snap[key] == value, key
