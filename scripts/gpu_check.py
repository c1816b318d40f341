"""The device check behind scripts/gpu_check.sh (needs an NVIDIA GPU, torch with CUDA).

`burn`: a bf16 matmul burst on one GPU for --seconds, then prints the FLOP/s it achieved.
`watch`: samples that GPU with trainmeter's NVML backend while the burner runs, prints each row,
then OFU (tensor_active x min(SM clock, tensor clock) / tensor clock, as docs/formulas define it), the ladder
(GPU-Util, SM active, tensor active, OFU, MFU of the burst against the cited dense peak), and
writes rows, a recorded NVML fixture, `tm hardware --json` and `tm doctor` output under --out.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path


def burn(args: argparse.Namespace) -> int:
    import torch

    if not torch.cuda.is_available():
        print("burn: no CUDA GPU", file=sys.stderr)
        return 1
    dev = torch.device("cuda", 0)
    n = args.size
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    torch.matmul(a, b)
    torch.cuda.synchronize(dev)
    start = time.perf_counter()
    iters = 0
    while time.perf_counter() - start < args.seconds:
        for _ in range(50):
            torch.matmul(a, b)
        torch.cuda.synchronize(dev)
        iters += 50
    elapsed = time.perf_counter() - start
    flops = 2.0 * n**3 * iters / elapsed
    print(
        json.dumps({"burn_flops_per_s": flops, "iters": iters, "seconds": elapsed, "n": n}),
        flush=True,
    )
    return 0


def _fmt(row: dict) -> str:
    keys = (
        "gpu_util",
        "sm_active",
        "tensor_active",
        "dram_active",
        "sm_clock_mhz",
        "power_w",
        "energy_j",
        "window_s",
        "throttle",
    )
    return "  ".join(
        f"{k}={row[k]:.3g}" if isinstance(row.get(k), float) else f"{k}={row.get(k)}"
        for k in keys
        if k in row
    )


def watch(args: argparse.Namespace) -> int:
    from trainmeter.sources.gpu.backend import PynvmlBackend
    from trainmeter.sources.gpu.record import record
    from trainmeter.sources.gpu.sampler import GpuSampler

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    burner = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "burn",
            "--seconds",
            str(args.seconds),
            "--size",
            str(args.size),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    # Select by process, as `tm` does: the GPU NVML lists the burner on (in a container NVML
    # may list host pids; then it falls back to all GPUs and says so in selected_by).
    sampler = GpuSampler(env={}, tree_pids=lambda: [burner.pid])
    rows = []
    recorded = False
    try:
        start = time.monotonic()
        while time.monotonic() - start < args.seconds and burner.poll() is None:
            d = sampler.sample()
            if "unavailable" in d:
                print(f"NVML unavailable: {d['unavailable']}")
                break
            for row in d["gpus"]:
                rows.append(row)
                print(
                    f"[{time.strftime('%H:%M:%S')}] gpu{row['index']} "
                    f"({d['selected_by']}) {_fmt(row)}"
                )
                if row.get("missing"):
                    print(f"    missing: {json.dumps(row['missing'])}")
            if not recorded and time.monotonic() - start > args.seconds / 2:
                # Mid-burst: record a fixture from the live NVML for the fake backend.
                recorded = True
                fixture = record(
                    PynvmlBackend(),
                    samples=3,
                    interval_s=1.0,
                    note=f"recorded by scripts/gpu_check.sh on {os.uname().nodename} "
                    f"{time.strftime('%Y-%m-%d')} during a bf16 matmul burst",
                )
                (out / "nvml_fixture.json").write_text(json.dumps(fixture, indent=1))
            time.sleep(args.interval)
        if not recorded:
            fixture = record(
                PynvmlBackend(),
                samples=2,
                interval_s=1.0,
                note=f"recorded by scripts/gpu_check.sh on {os.uname().nodename}",
            )
            (out / "nvml_fixture.json").write_text(json.dumps(fixture, indent=1))
    finally:
        sampler.close()
        stdout, _ = burner.communicate(timeout=args.seconds + 120)
    (out / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    burst = next((json.loads(x) for x in stdout.splitlines() if x.startswith("{")), None)
    _ladder(rows, burst)
    for name, cmd in (("hardware.json", ["hardware", "--json"]), ("doctor.txt", ["doctor"])):
        res = subprocess.run(
            [sys.executable, "-m", "trainmeter", *cmd], capture_output=True, text=True, timeout=60
        )
        (out / name).write_text(res.stdout + res.stderr)
    print(f"outputs in {out}: rows.jsonl nvml_fixture.json hardware.json doctor.txt")
    return 0 if rows else 1


def _ladder(rows: list[dict], burst: dict | None) -> None:
    busy = [r for r in rows if "tensor_active" in r and r.get("gpu_util", 0) > 0.5]
    if not rows:
        print("no rows sampled")
        return
    name = rows[-1].get("name", "")
    try:
        from trainmeter.hardware.specs import lookup

        spec = lookup(name)
    except ImportError:
        spec = None
    peak = getattr(spec, "bf16_dense_flops", None)
    tclock = getattr(spec, "tensor_clock_mhz", None)
    print(f"\nladder for {name} over {len(busy)} busy GPM windows:")

    def mean(key: str) -> float | None:
        vals = [r[key] for r in busy if key in r]
        return sum(vals) / len(vals) if vals else None

    ofus = []
    for r in busy:
        clock = tclock or r.get("max_sm_clock_mhz")
        if clock and "sm_clock_mhz" in r:
            ofus.append(r["tensor_active"] * min(r["sm_clock_mhz"], clock) / clock)
    for label, value in (
        ("GPU-Util", mean("gpu_util")),
        ("SM active", mean("sm_active")),
        ("tensor active", mean("tensor_active")),
        ("OFU" + ("" if tclock else " (vs max SM clock)"), sum(ofus) / len(ofus) if ofus else None),
    ):
        print(f"  {label:<28} {'absent' if value is None else f'{value:.3f}'}")
    if burst and peak:
        print(
            f"  {'MFU of the burst':<28} {burst['burn_flops_per_s'] / peak:.3f} "
            f"({burst['burn_flops_per_s'] / 1e12:.1f} TFLOP/s of {peak / 1e12:g} dense)"
        )
    else:
        print(f"  {'MFU of the burst':<28} absent (no cited peak for {name!r} or no burst)")


def main() -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("burn")
    b.add_argument("--seconds", type=float, default=30)
    b.add_argument("--size", type=int, default=8192)
    w = sub.add_parser("watch")
    w.add_argument("--seconds", type=float, default=30)
    w.add_argument("--size", type=int, default=8192)
    w.add_argument("--interval", type=float, default=1.0)
    w.add_argument("--out", default=os.environ.get("OUT") or "gpu_check_out")
    args = parser.parse_args()
    return burn(args) if args.cmd == "burn" else watch(args)


if __name__ == "__main__":
    sys.exit(main())
