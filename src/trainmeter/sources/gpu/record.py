"""Write down what a backend answers, in the fake backend's fixture format.

On a machine with a GPU, `python -m trainmeter.sources.gpu.record OUT.json --samples 3` records
a fixture from the live NVML that can replace the hand-written ones in tests/fixtures/nvml.
`tm hardware --dump` uses the same `RecordingBackend` so a user's bug report replays as a test.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from .backend import OPS, Backend, GpuError
from .fake import FORMAT
from .nvml import PynvmlBackend


class RecordingBackend:
    """Wraps a backend; every answer (or error) is appended to a fixture being built."""

    def __init__(self, inner: Backend, note: str = "") -> None:
        self.inner = inner
        self.fixture: dict[str, Any] = {
            "format": FORMAT,
            "note": note,
            "init": None,
            "versions": {},
            "devices": [],
        }

    def init(self) -> None:
        try:
            self.inner.init()
        except GpuError as exc:
            self.fixture["init"] = {"error": exc.name}
            raise

    def shutdown(self) -> None:
        self.inner.shutdown()

    def versions(self) -> dict[str, Any]:
        value = self.inner.versions()
        self.fixture["versions"] = dict(value)
        return value

    def device_count(self) -> int:
        n = self.inner.device_count()
        while len(self.fixture["devices"]) < n:
            self.fixture["devices"].append({"ops": {}})
        return n

    def query(self, index: int, op: str) -> Any:
        while len(self.fixture["devices"]) <= index:
            self.fixture["devices"].append({"ops": {}})
        answers = self.fixture["devices"][index]["ops"].setdefault(op, [])
        try:
            value = self.inner.query(index, op)
        except GpuError as exc:
            answers.append({"error": exc.name})
            raise
        answers.append(value)
        return value


def record(backend: Backend, samples: int = 3, interval_s: float = 1.0, note: str = "") -> dict:
    """Ask every op of every device `samples` times, `interval_s` apart; return the fixture."""
    rec = RecordingBackend(backend, note=note)
    try:
        rec.init()
    except GpuError:
        return rec.fixture
    try:
        rec.versions()
        n = rec.device_count()
        for k in range(samples):
            if k:
                time.sleep(interval_s)
            for index in range(n):
                for op in OPS:
                    try:
                        rec.query(index, op)
                    except GpuError:
                        pass
    finally:
        rec.shutdown()
    return rec.fixture


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m trainmeter.sources.gpu.record",
        description="Record the live NVML answers as a trainmeter fake-backend fixture.",
    )
    parser.add_argument("out", help="fixture file to write (JSON)")
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--note", default="recorded from the live NVML")
    args = parser.parse_args(argv)
    fixture = record(PynvmlBackend(), args.samples, args.interval, args.note)
    with open(args.out, "w") as fh:
        json.dump(fixture, fh, indent=1)
    n = len(fixture["devices"])
    if fixture["init"]:
        print(f"NVML unavailable ({fixture['init']['error']}); wrote {args.out}", file=sys.stderr)
        return 1
    print(f"recorded {n} GPU(s), {args.samples} samples each, to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
