"""The replay's outputs, dumped so two versions of the engine can be compared byte for byte.

    .venv/bin/python benchmarks/replay_equality.py OUT.json [--steps 20000]
    PYTHONPATH=/tmp/old/src .venv/bin/python benchmarks/replay_equality.py OLD.json
    cmp OUT.json OLD.json

Two logs: `run_all.py`'s benchmark log (`write_log`) and a 2-rank log made here (the clock
rank's hello after rank 1's steps, records out of order, k=2, a stall, phases before the first
step and after the last, comm waits, metrics logged by both ranks, two GPUs). Each is replayed
three ways: with the dashboard's history (the samples it is handed, its dump, the final
snapshot), with an observer that reads every key (every sample whole), and without observers
(the final snapshot). The dump keeps key order (a dict's order is part of the output).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from run_all import write_log

from trainmeter.runlog.replay import replay
from trainmeter.views.history import History


class Tape:
    """An observer that keeps everything it is handed; `reads` as the history's, or every key."""

    name = "tape"

    def __init__(self, reads: frozenset[str] | None) -> None:
        if reads is not None:
            self.reads = reads
        self.got: list[Any] = []

    def on_points(self, points: list[tuple[Any, ...]], origin: float | None) -> None:
        self.got.append(["points", list(points), origin])

    def on_snapshot(self, snap: dict[str, Any], now: float) -> None:
        self.got.append(["sample", snap, now])

    def on_finish(self, snap: dict[str, Any]) -> None:
        self.got.append(["finish", snap])


def two_rank_log(path: Path, steps: int = 3000) -> int:
    """A 2-rank log with the odd orders a job's log holds."""
    n = 0
    with open(path, "w", encoding="utf-8") as fh:

        def put(t: float, src: str, kind: str, d: dict, rank: int | None = 0, pid: int = 100) -> None:
            nonlocal n
            rec = {"v": 1, "t": round(t, 6), "src": src, "rank": rank, "pid": pid, "kind": kind, "d": d}
            fh.write(json.dumps(rec, separators=(",", ":")) + "\n")
            n += 1

        put(0.0, "tm", "run.start", {"argv": ["python", "train.py"], "name": "two", "declared": {}}, None)
        put(0.3, "agent", "phase", {"name": "data", "s": 0.05, "n": 1}, 0)  # before any step
        put(0.4, "agent", "hello", {"world_size": 2, "local_rank": 1, "rank": 1, "probes": ["steps", "tokens", "dataloader", "collectives"]}, 1, 101)
        put(0.45, "agent", "step", {"k": 1, "tokens": 1000, "n": 1}, 1, 101)
        put(0.46, "emit", "metric", {"key": "loss", "value": 9.0, "via": "emit", "step": 1}, 1, 101)
        put(0.5, "agent", "hello", {"world_size": 2, "local_rank": 0, "rank": 0, "probes": ["steps", "tokens", "dataloader", "collectives"]}, 0, 100)
        put(0.6, "agent", "fact", {"key": "n_params", "value": 1_000_000, "source": "detected"}, 0)
        put(0.6, "agent", "fact", {"key": "seq_len", "value": 128, "source": "detected"}, 0)
        t = 1.0
        energy = 0.0
        next_sample = 1.0
        for i in range(1, steps + 1):
            step_s = 0.05 if i % 500 != 250 else 3.0  # a stall now and then
            t += step_s
            k = 2 if i % 7 == 0 else 1
            if i % 3:
                put(t - 0.01, "agent", "phase", {"name": "data", "s": 0.01, "n": 1}, 0)
            if i % 11 == 0:
                put(t - 0.005, "agent", "phase", {"name": "eval", "s": 0.004, "n": 1}, 0)
            put(t - 0.012, "agent", "phase", {"name": "data", "s": 0.02, "n": 1}, 1, 101)
            if i % 13 == 0:  # out of order: a step record older than the last
                put(t - 0.2, "agent", "step", {"k": k, "tokens": 512 * k, "real_tokens": 400 * k, "n": i}, 0)
            else:
                put(t, "agent", "step", {"k": k, "tokens": 512 * k, "real_tokens": 400 * k, "n": i}, 0)
            put(t + 0.001, "agent", "step", {"k": k, "tokens": 512 * k, "n": i}, 1, 101)
            put(t, "agent", "comm", {"s": 0.003, "calls": 2, "spans_s": 0.001}, 0)
            put(t + 0.001, "agent", "comm", {"s": 0.001, "calls": 2}, 1, 101)
            if i % 2:
                put(t, "emit", "metric", {"key": "loss", "value": 3.0 / (1 + i / 100), "via": "emit", "step": i}, 0)
            else:
                put(t, "agent", "metric", {"key": "train/loss", "value": 2 + i % 5, "via": "wandb"}, 0)
            put(t + 0.001, "emit", "metric", {"key": "loss", "value": 4.0, "via": "emit", "step": i}, 1, 101)
            if i % 5 == 0:
                put(t, "emit", "metric", {"key": "lr", "value": 1e-3, "step": i}, None)
            while t >= next_sample:
                energy += 600.0
                rows = [
                    {"index": g, "uuid": f"GPU-{g}", "name": "NVIDIA H100 80GB HBM3", "gpu_util": 0.9,
                     "sm_active": 0.8 - g / 10, "tensor_active": 0.5, "dram_active": 0.3, "sm_clock_mhz": 1900,
                     "max_sm_clock_mhz": 1980, "window_s": 1.0, "energy_j": energy + g, "power_w": 600.0}
                    for g in range(2)
                ]
                put(next_sample, "tm", "sample.gpu", {"gpus": rows, "selected_by": "all"}, None)
                put(next_sample, "tm", "sample.host", {"procs": 4, "cpu_s": next_sample * 2, "rss_kb": 2_000_000}, None)
                put(next_sample, "tm", "sample.node", {"cpu": {"user": 0.6, "system": 0.1, "idle": 0.3}, "cores": 16, "load": [2.0, 1.5, 1.0]}, None)
                next_sample += 1.0
        put(t + 0.3, "agent", "phase", {"name": "checkpoint", "s": 0.2, "n": 1}, 0)  # after the last step
        put(t + 0.5, "tm", "run.end", {"exit_status": 0, "elapsed_s": t + 0.5}, None)
    return n


def outputs(log: Path) -> dict[str, Any]:
    history = History()
    tape = Tape(history.reads)
    got = replay(log, observers=[history, tape], max_snapshots=2000, resume=False)
    whole = Tape(None)
    got_whole = replay(log, observers=[whole], max_snapshots=500, resume=False)
    bare = replay(log, max_snapshots=2000, resume=False)
    return {
        "snapshot": got.snapshot,
        "records": [got.records, got.bad, got.bad_reasons, got.feed_errors],
        "history": history.dump(),
        "tape": tape.got,
        "whole": whole.got,
        "snapshot_whole": got_whole.snapshot,
        "snapshot_bare": bare.snapshot,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--steps", type=int, default=20_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tm-equality-") as tmp:
        bench, two = Path(tmp) / "bench.jsonl", Path(tmp) / "two.jsonl"
        write_log(bench, args.steps)
        two_rank_log(two)
        dump = {"bench": outputs(bench), "two_ranks": outputs(two)}
    text = json.dumps(dump, default=repr)
    args.out.write_text(text)
    for name, part in dump.items():
        part_text = json.dumps(part, default=repr)
        print(f"{name}: {len(part_text):,} bytes, sha256 {hashlib.sha256(part_text.encode()).hexdigest()[:16]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
