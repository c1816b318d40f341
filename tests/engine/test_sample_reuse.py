"""A sample reuses the parts whose inputs did not move since the last one: the model's FLOPs
per token and conventions (per version of the facts and of the convention registry) and the
GPUs' part, their names, count and peak (per version of the facts, the device facts taken and
`GpuCounters.layout`). A part reused after its inputs moved would be stale, so here every input
moves in turn, a sample taken just before (the part is then kept) and just after, and each
sample is compared with a whole snapshot taken at the same point: the values must be the
snapshot's, and the key each change moves must have moved."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainmeter.engine import flops
from trainmeter.engine.flops import Convention

from . import build as b

A100 = "NVIDIA A100-SXM4-80GB"
#: The keys the reused parts give, and those read with them (`Engine.sample`'s readers' keys).
KEYS = frozenset({"flops_per_token", "flops_spent", "conventions", "convention_formulas",
                  "peak", "devices", "n_gpus", "gpu_versions", "mfu", "ladder", "tokens_seen"})


def _row(index: int = 0, name: str = b.H100, **extra: Any) -> dict[str, Any]:
    return b.gpu_row(index=index, name=name, gpu_util=0.9, sm_active=0.8, tensor_active=0.5,
                     sm_clock_mhz=1980, max_sm_clock_mhz=1980, window_s=1.0, **extra)


def _register() -> None:
    flops.register(Convention(
        "reuse_twice", formula="2·6·N", source="this test", counts="twice",
        per_token=lambda s: 2 * flops.flops_per_token(s, "all_params"),
        expression=lambda s: f"2 * ({flops.get('all_params').expression(s)})",
    ))


SHAPE = {"n_params": 124_000_000, "n_embedding_params": 38_000_000, "n_layers": 12,
         "d_model": 768, "seq_len": 1024}

#: (what moves, the records that move it (or a call), the sample key it must move)
CHANGES: list[tuple[str, Callable[[float], list[dict[str, Any]]] | Callable[[], None], str]] = [
    ("the model's shape", lambda t: [b.fact(t, k, v) for k, v in SHAPE.items()],
     "flops_per_token"),
    ("a convention chosen", lambda t: [b.fact(t, "convention", "megatron", "declared")],
     "flops_spent"),
    ("a declared tokens per step", lambda t: [b.fact(t, "tokens_per_step", 4096, "declared")],
     "flops_spent"),
    ("a measured peak in a GPU row",
     lambda t: [b.gpu(t, _row(measured_peak_flops=7e14), selected_by="all")], "peak"),
    ("the GPUs selected by process", lambda t: [b.gpu(t, _row(), selected_by="process")],
     "n_gpus"),
    ("the driver's versions", lambda t: [
        b.rec("sample.gpu", t, rank=None, src="tm", gpus=[_row()], selected_by="process",
              versions={"driver": "570.1"})], "gpu_versions"),
    ("other driver versions", lambda t: [
        b.rec("sample.gpu", t, rank=None, src="tm", gpus=[_row()], selected_by="process",
              versions={"driver": "570.2"})], "gpu_versions"),
    ("a second GPU", lambda t: [b.gpu(t, _row(), _row(1))], "n_gpus"),
    ("GPU 1 another card", lambda t: [b.gpu(t, _row(), _row(1, A100))], "devices"),
    ("GPU 1 the same card again", lambda t: [b.gpu(t, _row(), _row(1))], "devices"),
    ("a declared peak", lambda t: [b.fact(t, "peak_flops", 5e14, "declared")], "peak"),
    ("the training's device facts", lambda t: [b.device(t, index=0), b.device(t, A100, 1)],
     "devices"),
    ("a convention registered", _register, "conventions"),
]


def _sample_equals_snapshot(engine: Any, now: float, where: str) -> dict[str, Any]:
    sample, snap = engine.sample(now=now), engine.snapshot(now=now)
    for key, value in sample.items():
        assert snap[key] == value, (where, key)
    for key in KEYS:
        assert (key in sample) == (key in snap), (where, key)
    some = engine.sample(now=now, keys=KEYS)
    assert some == {k: v for k, v in sample.items() if k in KEYS}, where
    return sample


def test_a_sample_after_each_change_is_the_snapshots() -> None:
    engine = b.Engine()
    t = 0.0
    for record in [b.start(0.0), b.hello(0.5, probes=("steps", "tokens"))]:
        engine.feed(record)
    engine.feed(b.gpu(0.6, _row(), selected_by="all"))
    step = 0

    def steps(n: int) -> None:
        nonlocal t, step
        for _ in range(n):
            step += 1
            t = 1.0 + 0.25 * step
            engine.feed(b.step(t, tokens=8192, n=step))

    steps(8)
    try:
        for what, change, moved in CHANGES:
            steps(2)
            before = _sample_equals_snapshot(engine, t + 0.1, f"before {what}")
            again = engine.sample(now=t + 0.1)  # nothing moved: the same part, reused
            for key in ("flops_per_token", "peak"):
                if key in before:
                    assert again[key] is before[key], (what, key)
            got = change(t + 0.01) if change.__code__.co_argcount else change()  # type: ignore[call-arg]
            for record in got or []:
                engine.feed(record)
            steps(2)
            after = _sample_equals_snapshot(engine, t + 0.1, f"after {what}")
            assert after.get(moved) != before.get(moved), (what, moved)
    finally:
        flops.unregister("reuse_twice")
