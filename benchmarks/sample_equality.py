"""Every sample a replay hands its observers, the final snapshot and the history's dump, written
out so two versions of the code can be compared byte for byte.

    .venv/bin/python benchmarks/sample_equality.py --out /tmp/before   # on the old code
    .venv/bin/python benchmarks/sample_equality.py --out /tmp/after    # on the new code
    cmp /tmp/before/digest.txt /tmp/after/digest.txt

Logs: `run_all.write_log` at `--steps` (the replay row's), and a 2-rank, 2-GPU log that moves
every input a sample's parts read along the run (facts arriving late, a declared tokens per
step, a device fact naming another card, GPU rows that come and go, memory, comm waits, host
and node samples, a run that ends). Each log is replayed twice: with the history alone (the
samples hold the history's keys, `reads`) and with an observer that reads every key. `repr`
keeps the keys' order and every float's digits.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
from pathlib import Path
from typing import Any

from run_all import write_log

from trainmeter.runlog.replay import replay
from trainmeter.views.history import History


class Keep:
    """Records each sample as its repr, before the history sees it; `reads` as given."""

    def __init__(self, reads: frozenset[str] | None) -> None:
        if reads is not None:
            self.reads = reads
        self.samples: list[str] = []

    def on_snapshot(self, snap: dict[str, Any], now: float | None = None) -> None:
        self.samples.append(f"{now!r} {snap!r}")


def write_two_ranks(path: Path, steps: int) -> int:
    """Two ranks, two GPUs, and every input of a sample moving at some point of the run."""
    n = 0
    with open(path, "w", encoding="utf-8") as fh:

        def put(t: float, src: str, kind: str, d: dict, rank: int | None = 0) -> None:
            nonlocal n
            rec = {"v": 1, "t": round(t, 6), "src": src, "rank": rank, "pid": 100 + (rank or 0),
                   "kind": kind, "d": d}
            fh.write(json.dumps(rec, separators=(",", ":")) + "\n")
            n += 1

        put(0.0, "tm", "run.start", {"argv": ["python", "train.py"], "name": "two",
                                     "declared": {}, "node_uptime_s": 100.0}, None)
        for r in (0, 1):
            put(0.5, "agent", "hello", {"world_size": 2, "local_rank": r, "rank": r,
                                        "probes": ["steps", "tokens", "dataloader"]}, r)
            put(0.55, "agent", "fact", {"key": "device", "value": {
                "name": "NVIDIA H100 80GB HBM3", "index": r, "uuid": f"GPU-{r}"},
                "source": "detected"}, r)
        energy = [0.0, 0.0]
        next_sample = 1.0
        for i in range(1, steps + 1):
            t = 1.0 + i * 0.1
            if i == steps // 10:  # the model's shape arrives late: FLOPs per token, MFU
                for key, value in {"n_params": 124_000_000, "n_embedding_params": 38_000_000,
                                   "n_layers": 12, "d_model": 768, "seq_len": 1024}.items():
                    put(t - 0.02, "agent", "fact", {"key": key, "value": value,
                                                     "source": "detected"})
            if i == steps // 5:
                put(t - 0.02, "agent", "fact", {"key": "tokens_per_step", "value": 16384,
                                                 "source": "declared"})
            if i == steps // 4:
                put(t - 0.02, "agent", "fact", {"key": "matmul_precision", "value": "high",
                                                 "source": "detected", "note": "torch"})
            if i == steps // 3:  # the peak changes: another card named for GPU 1
                put(t - 0.02, "agent", "fact", {"key": "device", "value": {
                    "name": "NVIDIA A100-SXM4-80GB", "index": 1, "uuid": "GPU-1"},
                    "source": "detected"}, 1)
            if i == steps // 2:
                put(t - 0.02, "agent", "fact", {"key": "budget_tokens", "value": 1e9,
                                                 "source": "declared"})
                put(t - 0.02, "agent", "fact", {"key": "peak_flops", "value": 5e14,
                                                 "source": "declared"})
            if i == steps * 3 // 5:  # a convention chosen: MFU a value, not a range
                put(t - 0.02, "agent", "fact", {"key": "convention", "value": "megatron",
                                                 "source": "declared"})
            for r in (0, 1):
                put(t - 0.01 + 0.001 * r, "agent", "phase", {"name": "data", "s": 0.01, "n": 1},
                    r)
                if i % 3 == 0:
                    put(t - 0.005, "agent", "comm", {"s": 0.004 + 0.002 * r, "calls": 2,
                                                     "spans_s": 0.001}, r)
                put(t + 0.002 * r, "agent", "step", {"k": 1, "tokens": 8192, "n": i,
                                                      "micro": 1}, r)
            put(t, "agent", "metric", {"key": "train_loss", "value": 3.0 / (1 + i / 1000),
                                       "via": "emit", "step": i})
            if i % 50 == 0:
                put(t, "agent", "metric", {"key": "lr", "value": 1e-4 * (1 + i % 7),
                                           "via": "emit", "step": i}, 1)
            while t >= next_sample:
                k = int(next_sample)
                rows = []
                for g in (0, 1):
                    if g == 1 and 30 <= k % 200 < 60:
                        continue  # GPU 1 missing from some samples
                    energy[g] += 650.0 + 50 * g
                    rows.append({
                        "index": g, "uuid": f"GPU-{g}", "name": "NVIDIA H100 80GB HBM3",
                        "gpu_util": 0.9 + 0.01 * (k % 5), "sm_active": 0.8, "tensor_active":
                        0.5 + 0.01 * (k % 3), "dram_active": 0.4, "sm_clock_mhz": 1980 - k % 4,
                        "max_sm_clock_mhz": 1980, "window_s": 1.0, "energy_j": energy[g],
                        "power_w": 650.0 + 50 * g, "memory_used_b": 4e10 + k,
                    })
                if k % 100 != 50:  # some seconds without any GPU record
                    put(next_sample, "tm", "sample.gpu", {"gpus": rows, "selected_by": "all"},
                        None)
                put(next_sample, "tm", "sample.host", {"procs": 3, "cpu_s": next_sample,
                                                       "rss_kb": 1_000_000 + k}, None)
                put(next_sample, "tm", "sample.node", {
                    "cpu": {"user": 0.5, "system": 0.1, "idle": 0.4}, "cores": 16,
                    "load": [1.0, 1.0, 1.0], "memory": {"used_b": 3e9 + k},
                    "net": {"rx_b": 100 * k, "tx_b": 5 * k}}, None)
                for r in (0, 1):
                    if k % 2 == r:
                        put(next_sample, "agent", "memory", {
                            "device": "cuda", "index": r, "allocated_b": 10 * k,
                            "reserved_b": 20 * k, "reserved_peak_b": 20 * k,
                            "alloc_retries": k // 40}, r)
                next_sample += 1.0
        put(1.0 + steps * 0.1 + 0.5, "tm", "run.end",
            {"exit_status": 0, "elapsed_s": 1.0 + steps * 0.1}, None)
    return n


def one(path: Path, every_key: bool) -> dict[str, Any]:
    history = History()
    keep = Keep(None if every_key else history.reads)
    result = replay(path, observers=[keep, history], max_snapshots=2000, resume=False)
    return {
        "samples": keep.samples,
        "snapshot": repr(result.snapshot),
        "history": repr(history.dump()),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=20000)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        logs = {"bench": Path(tmp) / "bench.jsonl", "two_ranks": Path(tmp) / "two.jsonl"}
        write_log(logs["bench"], args.steps)
        write_two_ranks(logs["two_ranks"], args.steps // 4)
        for name, path in logs.items():
            for every in (False, True):
                got = one(path, every)
                tag = f"{name}.{'all' if every else 'history'}"
                for part, text in (("samples", "\n".join(got["samples"])),
                                   ("snapshot", got["snapshot"]), ("history", got["history"])):
                    (args.out / f"{tag}.{part}.txt").write_text(text)
                    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
                    lines.append(f"{tag}.{part} {digest} {len(text)} bytes"
                                 + (f" {len(got['samples'])} samples" if part == "samples" else ""))
    (args.out / "digest.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
