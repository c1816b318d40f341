"""`python -m trainmeter.hardware.measure_peak`: time a dense bf16 matmul and keep it as this GPU's peak.

Run it yourself, with your own torch, on an idle GPU. It times `a @ b` for a few square sizes
with CUDA events, takes the best rate, and writes one file per GPU (see
`trainmeter.hardware.measured_peaks`) that `tm` then shows beside the datasheet peak, labelled as
measured. This is the one trainmeter entry point that creates a CUDA context; `tm` never does.
Without a CUDA GPU it says so and exits 1.
"""

from __future__ import annotations

import argparse
import socket
import sys
from datetime import datetime, timezone
from typing import Any

from trainmeter.hardware.measured_peaks import write_peak

DEFAULT_SIZES = (4096, 8192, 16384)


def matmul_flops(n: int) -> float:
    """FLOPs of one n x n by n x n matmul: n^2 outputs, each n multiplies and n adds."""
    return 2.0 * n * n * n


def build_record(
    *,
    uuid: str,
    device_name: str,
    timings: dict[int, tuple[int, float]],
    torch_version: str,
    hostname: str | None = None,
    when: datetime | None = None,
) -> dict[str, Any]:
    """The peak file's content from timings {n: (iterations, seconds)}; the best size wins."""
    rates = {n: matmul_flops(n) * iters / secs for n, (iters, secs) in timings.items() if secs > 0}
    if not rates:
        raise ValueError("no usable timing")
    best = max(rates, key=rates.__getitem__)
    return {
        "uuid": uuid,
        "hostname": hostname or socket.gethostname(),
        "device_name": device_name,
        "dtype": "bf16",
        "tflops": rates[best] / 1e12,
        "best_size": best,
        "sizes": sorted(rates),
        "per_size_tflops": {str(n): rates[n] / 1e12 for n in sorted(rates)},
        "method": "torch.matmul of square bf16 matrices, timed with CUDA events after warmup",
        "torch": torch_version,
        "date": (when or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def _time_size(torch: Any, device: Any, n: int, target_s: float) -> tuple[int, float]:
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        torch.matmul(a, b)
    torch.cuda.synchronize(device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.matmul(a, b)
    end.record()
    end.synchronize()
    one = max(start.elapsed_time(end) / 1e3, 1e-6)
    iters = max(5, int(target_s / one))
    start.record()
    for _ in range(iters):
        torch.matmul(a, b)
    end.record()
    end.synchronize()
    del a, b
    return iters, start.elapsed_time(end) / 1e3


def _uuid(torch: Any, index: int) -> str:
    raw = str(getattr(torch.cuda.get_device_properties(index), "uuid", "") or "")
    if not raw:
        raise RuntimeError("this torch does not report device UUIDs (torch >= 2.1 does)")
    return raw if raw.startswith(("GPU-", "MIG-")) else f"GPU-{raw}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m trainmeter.hardware.measure_peak", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--device",
        type=int,
        action="append",
        help="CUDA device index (repeatable); default: every visible GPU",
    )
    parser.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)))
    parser.add_argument("--seconds", type=float, default=1.0, help="timed seconds per size")
    args = parser.parse_args(argv)
    try:
        import torch
    except ImportError:
        print(
            "measure_peak: torch is not installed here; run it with the torch you train with",
            file=sys.stderr,
        )
        return 1
    if not torch.cuda.is_available():
        print("measure_peak: no CUDA GPU visible to torch here; nothing measured", file=sys.stderr)
        return 1
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    for index in args.device or range(torch.cuda.device_count()):
        device = torch.device("cuda", index)
        name = torch.cuda.get_device_name(index)
        timings = {}
        for n in sizes:
            try:
                timings[n] = _time_size(torch, device, n, args.seconds)
            except torch.cuda.OutOfMemoryError:
                print(f"  n={n}: out of memory, skipped", file=sys.stderr)
                torch.cuda.empty_cache()
        record = build_record(
            uuid=_uuid(torch, index),
            device_name=name,
            timings=timings,
            torch_version=torch.__version__,
        )
        path = write_peak(record)
        print(
            f"cuda:{index} {name}: {record['tflops']:.1f} TFLOP/s dense bf16 "
            f"(best at n={record['best_size']}) -> {path}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
