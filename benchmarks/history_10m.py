"""Ten million steps through the dashboard's history: memory and serving time stay flat.

Feeds the loss points as the engine hands them over (`Engine.take_points`: key, step, value,
seconds, tokens; taken about once a second, 66 steps here) and a snapshot every 1000 steps (as the
live loop does) into `views.history.History`, and at 10k, 100k, 1M and 10M
steps prints the history's memory (every object it holds, counted) and the time to serve it:
the whole state as the page's first event (`dump()` then JSON) and one incremental update.

    python benchmarks/history_10m.py [--steps 10000000]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from trainmeter.views.history import History  # noqa: E402


def deep_size(obj: object, seen: set[int] | None = None) -> int:
    """Bytes held by `obj` and everything it references (each object once)."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    size = sys.getsizeof(obj)
    if isinstance(obj, dict):
        size += sum(deep_size(k, seen) + deep_size(v, seen) for k, v in obj.items())
    elif isinstance(obj, (list, tuple, set, frozenset)):
        size += sum(deep_size(v, seen) for v in obj)
    elif hasattr(obj, "__slots__"):
        size += sum(deep_size(getattr(obj, s), seen) for s in obj.__slots__ if hasattr(obj, s))
    elif hasattr(obj, "__dict__"):
        size += deep_size(vars(obj), seen)
    return size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10_000_000)
    args = parser.parse_args()
    checkpoints = sorted({n for n in (10_000, 100_000, 1_000_000, 10_000_000) if n <= args.steps} | {args.steps})
    history = History()
    tokens_per_step = 16 * 64
    t0 = 1000.0
    history.on_points([], origin=t0)
    taken: list[tuple[str, int, float, float, float]] = []  # what one take_points hands over
    snap = {
        "steps": 0, "tokens_seen": 0.0, "tokens_per_s": 70_000.0, "step_time_s": 0.015,
        "flops_per_token": {"value": 674_304.0, "convention": "megatron"},
        "mfu": {"value": 0.41}, "ofu": {"value": 0.55}, "time": {"elapsed_s": 0.0, "goodput": 0.9},
        "ladder": {"mean": {"gpu_util": 0.98, "sm_active": 0.9, "tensor_active": 0.6}},
        "gpus": {"0": {"power_w": 650.0, "memory_used_b": 6.4e10}},
        "host": {"rss_b": 3.5e8, "cpu_cores": 1.0},
    }
    print(f"{'steps':>12} {'feed s':>8} {'us/step':>8} {'memory':>10} {'points':>6} "
          f"{'first event':>12} {'JSON size':>10} {'update':>8}")
    started = time.perf_counter()
    fed_at = started
    done = 0
    for target in checkpoints:
        for n in range(done + 1, target + 1):
            value = 4.0 / math.sqrt(n) + (10.0 if n == target // 3 else 0.0)  # one spike
            taken.append(("train_loss", n, value, n * 0.015, float(n * tokens_per_step)))
            if len(taken) == 66 or n == target:
                history.on_points(taken)
                taken = []
            if n % 1000 == 0:
                t = t0 + n * 0.015
                snap["steps"] = n
                snap["tokens_seen"] = float(n * tokens_per_step)
                snap["time"]["elapsed_s"] = n * 0.015
                history.on_snapshot(snap, t)
        done = target
        feed_s = time.perf_counter() - fed_at
        memory = deep_size(history)
        a = time.perf_counter()
        first = json.dumps(history.dump(), separators=(",", ":"))
        first_s = time.perf_counter() - a
        marks = history.marks()
        # about a second of steps, then one update
        history.on_points([("train_loss", n, 1.0, n * 0.015, float(n * tokens_per_step))
                           for n in range(target + 1, target + 67)])
        a = time.perf_counter()
        json.dumps(history.dump(marks), separators=(",", ":"))
        update_s = time.perf_counter() - a
        loss = history.series["train_loss"]
        assert max(loss.hi) >= 10.0, "the spike was lost"
        print(f"{target:>12,} {time.perf_counter() - started:>8.1f} "
              f"{feed_s / (target - (checkpoints[checkpoints.index(target) - 1] if checkpoints.index(target) else 0)) * 1e6:>8.2f} "
              f"{memory / 1e6:>8.2f}MB {len(loss):>6} {first_s * 1e3:>10.1f}ms "
              f"{len(first) / 1e6:>8.2f}MB {update_s * 1e3:>6.2f}ms", flush=True)
        fed_at = time.perf_counter()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
