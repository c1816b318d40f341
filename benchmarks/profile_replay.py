"""Where a replay's time goes, stage by stage, and the profile behind it.

    .venv/bin/python benchmarks/profile_replay.py            # the 200k-step log of run_all.py
    .venv/bin/python benchmarks/profile_replay.py --steps 50000 --top 30

The same synthetic log as `run_all.py`'s replay row, read four times in one process, each time
one stage further along the path `tm summary` and `tm view` take (best of 3 each):

1. read the file in blocks and split it into lines;
2. + the decoder (typed msgspec records for the common kinds, orjson and the fast checks for
   the others, the standard-library path where unsure: `runlog.typed.typed_many`);
3. + the recorder and the engine (`runlog.replay.replay` without observers);
4. + the dashboard's bounded history and ~2,000 sampled snapshots (the full replay).

The differences are each stage's cost per record, measured without a profiler. Then cProfile's
top functions by own time over the full replay (the profiler inflates Python calls, so read its
shares, not its absolute times).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
import time
from io import BytesIO
from pathlib import Path

from run_all import write_log

from trainmeter.runlog.decode import Decoder
from trainmeter.runlog.replay import BLOCK, replay
from trainmeter.runlog.typed import typed_many
from trainmeter.views.history import History


def read_lines(path: Path) -> int:
    n = 0
    with open(path, "rb") as fh:
        rest = b""
        while block := fh.read(BLOCK):
            lines = BytesIO(rest + block).readlines()  # as `replay` splits them
            rest = b"" if lines[-1][-1:] == b"\n" else lines.pop()
            n += len(lines)
    return n


def decode_only(path: Path) -> int:
    decoder = Decoder()
    with open(path, "rb") as fh:
        rest = b""
        while block := fh.read(BLOCK):
            lines = BytesIO(rest + block).readlines()  # as `replay` splits them
            rest = b"" if lines[-1][-1:] == b"\n" else lines.pop()
            for _ in typed_many(decoder, lines):
                pass
    return decoder.good


def engine_only(path: Path) -> int:
    return replay(path, max_snapshots=2000, resume=False).records


def full(path: Path) -> int:
    return replay(path, observers=[History()], max_snapshots=2000, resume=False).records


def best(fn, path: Path, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        t0 = time.process_time()
        fn(path)
        times.append(time.process_time() - t0)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tm-profile-replay-") as tmp:
        log = Path(tmp) / "events.jsonl"
        total = write_log(log, args.steps)
        stages = [
            ("read and split lines", read_lines),
            ("+ decode (typed, orjson, checks)", decode_only),
            ("+ recorder and engine", engine_only),
            ("+ history and ~2,000 snapshots", full),
        ]
        print(f"{total:,} records, {log.stat().st_size / 1e6:.0f} MB; CPU seconds, best of 3\n")
        print("| stage | total µs/record | this stage µs/record |")
        print("| --- | --- | --- |")
        previous = 0.0
        for name, fn in stages:
            per = best(fn, log) / total * 1e6
            print(f"| {name} | {per:.2f} | {per - previous:.2f} |")
            previous = per
        profiler = cProfile.Profile()
        profiler.enable()
        full(log)
        profiler.disable()
        print(f"\ncProfile of the full replay, top {args.top} by own time:\n")
        pstats.Stats(profiler, stream=sys.stdout).strip_dirs().sort_stats("tottime").print_stats(
            args.top
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
