"""Instructions one sampled snapshot of a replay costs (`Engine.sample` with the history's keys).

    PYTHONHASHSEED=0 .venv/bin/python benchmarks/sample_instructions.py [--steps 20000] [--src DIR]
    PYTHONHASHSEED=0 .venv/bin/python benchmarks/sample_instructions.py --history

`--history` puts the dashboard's `History` observer in the null observer's place: the
difference from the plain count is what the history's `on_snapshot` adds to a sample (with the
points it is handed at each cut of the block).

The benchmark's log (`run_all.write_log`) is replayed twice under callgrind, counting only the
replay (decode, recorder, engine, the final snapshot): once with ~2,000 samples handed to an
observer that reads the history's keys and does nothing with them, once with at most one.
The difference over the difference in samples is what a sample costs, where it is taken (each
sample composes the parts from the state the records left, so a sample repeated on an engine
that took no record between would measure something else). Deterministic to some tens of
instructions with `PYTHONHASHSEED=0`. A benchmark, not a test: nothing here asserts.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_all  # noqa: E402 - the shared callgrind driver and environment

LOOP = r"""
import sys
from pathlib import Path
from trainmeter.runlog.replay import replay
from trainmeter.views.history import History
path, snapshots, mode = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
class Null:
    reads = History.reads
    samples = 0
    def on_snapshot(self, snap, now=None):
        Null.samples += 1
class Counted(History):
    def on_snapshot(self, snap, now=None):
        Null.samples += 1
        super().on_snapshot(snap, now)
make = Counted if mode == "history" else Null
replay(path, observers=[make()], max_snapshots=snapshots, resume=False)  # imports, caches
Null.samples = 0
print("READY", flush=True); sys.stdin.readline()
replay(path, observers=[make()], max_snapshots=snapshots, resume=False)
print("END", flush=True); sys.stdin.readline()
print("SAMPLES", Null.samples, file=sys.stderr)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--src", help="count this trainmeter instead (another tree's src/), "
                        "for a before and after on one machine")
    parser.add_argument("--history", action="store_true",
                        help="the History observer in the null observer's place")
    args = parser.parse_args()
    if not run_all.have_callgrind():
        sys.exit("valgrind (callgrind) is not installed")
    with tempfile.TemporaryDirectory(prefix="tm-bench-sample-") as tmp:
        cwd = Path(tmp)
        (cwd / "loop.py").write_text(LOOP)
        log = cwd / "events.jsonl"
        run_all.write_log(log, args.steps)
        env = run_all.clean_env(PYTHONHASHSEED="0", **({"PYTHONPATH": args.src} if args.src else {}))
        counts = {}
        mode = "history" if args.history else "null"
        for snapshots in (2000, 1):
            got = run_all.callgrind_instructions(
                [run_all.OUR_PY, "loop.py", str(log), str(snapshots), mode], env, cwd, cwd / "cg"
            )
            if got is None:
                return 1
            counts[snapshots] = got[1]
        # the samples each run took: the same replay without callgrind
        import subprocess

        taken = {}
        for snapshots in (2000, 1):
            proc = subprocess.run(
                [run_all.OUR_PY, "loop.py", str(log), str(snapshots), mode], cwd=cwd, env=env,
                input="go\ngo\n", capture_output=True, text=True, check=True,
            )
            taken[snapshots] = int(proc.stderr.split("SAMPLES")[-1].split()[0])
    extra = taken[2000] - taken[1]
    per = (counts[2000] - counts[1]) / extra
    print(f"replay with {taken[2000]} samples: {counts[2000]:,} instructions; with "
          f"{taken[1]}: {counts[1]:,}; a sample: {per:,.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
