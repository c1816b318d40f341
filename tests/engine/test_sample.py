"""`Engine.sample`: what a replay hands the charts along the run is the snapshot's own numbers.

The sample composes the same parts as the snapshot and leaves out those no chart draws, so each
of its keys must equal the snapshot's at the same moment, on every kind of run: GPUs with a
model shape (MFU, OFU, the ladder, energy), several ranks, memory, host and node, a loop without
tokens (tokens absent, not 0), a finished run, and none at all."""

from __future__ import annotations

import pytest

from . import build as b


def _gpu_run() -> list[dict]:
    out = [b.start(0.0), b.hello(0.5, probes=("steps", "tokens", "dataloader")), b.device(0.6)]
    out += [b.fact(0.7, "n_params", 124_000_000), b.fact(0.7, "seq_len", 1024),
            b.fact(0.7, "n_layers", 12), b.fact(0.7, "d_model", 768),
            b.fact(0.7, "n_embedding_params", 38_000_000)]
    energy = 0.0
    for i in range(1, 120):
        t = 1.0 + 0.25 * i
        out.append(b.phase(t - 0.01, "data", 0.01))
        out.append(b.step(t, tokens=8192, n=i))
        if i % 4 == 0:
            energy += 700.0
            row = b.gpu_row(gpu_util=0.9, sm_active=0.8, tensor_active=0.5, power_w=700.0,
                            energy_j=energy, memory_used_b=40e9, sm_clock_mhz=1980,
                            max_sm_clock_mhz=1980, window_s=1.0)
            out.append(b.gpu(t, row))
            out.append(b.rec("sample.host", t, rank=None, src="tm", procs=2, cpu_s=t, rss_kb=10**6))
            out.append(b.rec("sample.node", t, rank=None, src="tm", cpu={"idle": 0.25},
                             memory={"used_b": 3e9}, disk_io={"read_b": 10 * i, "write_b": 0},
                             net={"rx_b": 100 * i, "tx_b": 5}))
            out.append(b.rec("memory", t, device="cuda", index=0, allocated_b=10 * i,
                             reserved_b=20 * i, reserved_peak_b=20 * i, alloc_retries=i // 40))
    return out


def _two_ranks() -> list[dict]:
    out = [b.start(0.0)]
    for r in (0, 1):
        out.append(b.hello(0.5, world_size=2, rank=r))
    for i in range(1, 60):
        for r in (0, 1):
            out.append(b.step(1.0 + 0.5 * i + 0.01 * r, tokens=4096, rank=r, n=i))
    return out


def _no_tokens() -> list[dict]:
    return [b.start(0.0), b.hello(0.5)] + [b.step(1.0 + i, n=i) for i in range(1, 30)]


#: A reader's keys (`reads`), without the budget's and energy's: those parts are left out.
WANTED = frozenset({"steps", "tokens_seen", "mfu", "time", "ladder", "gpus", "memory"})

RUNS = {
    "gpu": _gpu_run(),
    "gpu_finished": _gpu_run() + [b.end(40.0)],
    "two_ranks": _two_ranks(),
    "no_tokens": _no_tokens(),
    "nothing": [b.start(0.0)],
}


@pytest.mark.parametrize("name", sorted(RUNS))
def test_every_key_of_the_sample_is_the_snapshots(name: str) -> None:
    engine = b.Engine()
    checked = 0
    for i, record in enumerate(RUNS[name]):
        engine.feed(record)
        if i % 7 and i != len(RUNS[name]) - 1:
            continue
        now = record["t"] + 0.1
        sample, snap = engine.sample(now=now), engine.snapshot(now=now)
        for key, value in sample.items():
            assert snap[key] == value, (name, i, key)
            checked += 1
        some = engine.sample(now=now, keys=WANTED)  # only what the readers read
        assert some == {k: v for k, v in sample.items() if k in WANTED}, (name, i)
        for key in ("steps", "tokens_seen", "tokens_per_s", "mfu", "ofu", "time", "ladder",
                    "gpus", "memory", "host", "node", "progress", "energy", "step_time_s"):
            assert (key in sample) == (key in snap), (name, i, key)  # absent in both
    assert checked > 0
    if name.startswith("gpu"):  # the numbers the charts draw are all there to compare
        assert {"mfu", "ofu", "ladder", "energy", "memory", "host", "node", "tokens_per_s",
                "flops_per_token", "time"} <= set(sample)
