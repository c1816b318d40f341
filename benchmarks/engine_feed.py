"""How fast the engine takes records: prints records/s for step records and a mixed stream.

Replay pushes every line of a long log through `Engine.feed`, so its cost per record bounds how
fast a finished run opens. Run: `.venv/bin/python benchmarks/engine_feed.py [N]`. A benchmark,
not a test: the numbers depend on the machine.
"""

from __future__ import annotations

import sys
import time

from trainmeter.engine import Engine


def step_records(n: int, ranks: int = 1) -> list[dict]:
    out = []
    for i in range(n):
        rank = i % ranks
        t = 10.0 + (i // ranks) * 0.05
        d = {"k": 1, "tokens": 4096, "n": i // ranks + 1, "micro": 1}
        out.append(
            {
                "v": 1,
                "t": t,
                "src": "agent",
                "rank": rank,
                "pid": 100 + rank,
                "kind": "step",
                "d": d,
            }
        )
    return out


def mixed_records(n: int) -> list[dict]:
    out = []
    for i in range(n):
        t = 10.0 + i * 0.01
        if i % 10 == 0:
            d = {"key": "train_loss", "value": 2.0 + 1.0 / (i + 1), "via": "emit", "step": i}
            out.append(
                {"v": 1, "t": t, "src": "emit", "rank": 0, "pid": 1, "kind": "metric", "d": d}
            )
        elif i % 50 == 1:
            row = {
                "index": 0,
                "uuid": "GPU-0",
                "name": "NVIDIA H100 80GB HBM3",
                "gpu_util": 1.0,
                "sm_active": 0.8,
                "tensor_active": 0.5,
                "dram_active": 0.3,
                "sm_clock_mhz": 1980,
                "max_sm_clock_mhz": 1980,
                "window_s": 1.0,
                "energy_j": 1000.0 + i,
            }
            out.append(
                {
                    "v": 1,
                    "t": t,
                    "src": "tm",
                    "rank": None,
                    "pid": None,
                    "kind": "sample.gpu",
                    "d": {"gpus": [row], "selected_by": "process"},
                }
            )
        else:
            out.append(
                {
                    "v": 1,
                    "t": t,
                    "src": "agent",
                    "rank": 0,
                    "pid": 1,
                    "kind": "step",
                    "d": {"k": 1, "tokens": 4096, "n": i},
                }
            )
    return out


def rate(records: list[dict]) -> float:
    engine = Engine()
    start = time.perf_counter()
    feed = engine.feed
    for r in records:
        feed(r)
    return len(records) / (time.perf_counter() - start)


def snapshot_cost(n: int) -> float:
    engine = Engine()
    for r in mixed_records(n):
        engine.feed(r)
    start = time.perf_counter()
    for _ in range(100):
        engine.snapshot(now=1e6)
    return (time.perf_counter() - start) / 100


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 300_000
    print(f"step records, 1 rank:  {rate(step_records(n)):>12,.0f} records/s")
    print(f"step records, 8 ranks: {rate(step_records(n, 8)):>12,.0f} records/s")
    print(f"mixed stream:          {rate(mixed_records(n)):>12,.0f} records/s")
    for size in (1_000, 100_000):
        print(f"snapshot after {size:>7,} records: {snapshot_cost(size) * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
