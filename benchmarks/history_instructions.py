"""Instructions the dashboard's bounded history costs a replay, a record and in all.

    PYTHONHASHSEED=0 .venv/bin/python benchmarks/history_instructions.py [--steps 20000] [--src DIR]
    PYTHONHASHSEED=0 .venv/bin/python benchmarks/history_instructions.py --alone --steps 200000

The benchmark's log (`run_all.write_log`) is replayed three times under callgrind, counting only
the replay (decode, recorder, engine, the observers, the final snapshot, the history's dump):

- `history`: the `History` observer, as `run_all.py`'s replay row and `tm view` replay;
- `null`: in its place an observer that reads the history's keys and takes the points and the
  samples without doing anything with them (the engine's points, the block cut at each sample
  and the ~2,000 samples are made as for the history);
- `bare`: no observer (no points, no samples).

`history - null` is what the history itself costs (`on_points`, `on_snapshot`, its `dump()`);
`null - bare` what the replay spends for any observer (the points, the cut, the samples).
With `--alone` the replay runs uncounted once, its observer keeping every call it gets, and
only a fresh `History` fed those calls (`on_points`, `on_snapshot`) and its `dump()` are
counted: the history's own cost without the replay around it, quick enough at 200k steps
(the three replays under callgrind take most of an hour there).

Deterministic to some tens of thousands of instructions with `PYTHONHASHSEED=0` (the recorder
reads the wall clock). A benchmark, not a test: nothing here asserts.
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
path, mode = Path(sys.argv[1]), sys.argv[2]
class Null:
    reads = History.reads
    def on_points(self, points, origin=None):
        pass
    def on_snapshot(self, snap, now=None):
        pass
    def dump(self):
        return {}
def observers():
    return {"history": [History()], "null": [Null()], "bare": []}[mode]
got = observers()
replay(path, observers=got, resume=False)  # imports, caches
for obs in got:
    obs.dump()
got = observers()
print("READY", flush=True); sys.stdin.readline()
result = replay(path, observers=got, resume=False)
for obs in got:
    obs.dump()
print("END", flush=True); sys.stdin.readline()
print("RECORDS", result.records, file=sys.stderr)
"""

MODES = ("history", "null", "bare")

ALONE = r"""
import sys
from pathlib import Path
from trainmeter.runlog.replay import replay
from trainmeter.views.history import History
class Tape:
    reads = History.reads
    def __init__(self):
        self.calls = []
    def on_points(self, points, origin=None):
        self.calls.append((True, list(points), origin))
    def on_snapshot(self, snap, now=None):
        self.calls.append((False, snap, now))
tape = Tape()
result = replay(Path(sys.argv[1]), observers=[tape], resume=False)
def feed():
    history = History()
    for is_points, got, at in tape.calls:
        if is_points:
            history.on_points(got, at)
        else:
            history.on_snapshot(got, at)
    history.dump()
feed()  # caches
print("READY", flush=True); sys.stdin.readline()
feed()
print("END", flush=True); sys.stdin.readline()
print("RECORDS", result.records, file=sys.stderr)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--src", help="count this trainmeter instead (another tree's src/), "
                        "for a before and after on one machine")
    parser.add_argument("--alone", action="store_true",
                        help="count the history alone, fed a replay's calls (see above)")
    args = parser.parse_args()
    if not run_all.have_callgrind():
        sys.exit("valgrind (callgrind) is not installed")
    with tempfile.TemporaryDirectory(prefix="tm-bench-history-") as tmp:
        cwd = Path(tmp)
        (cwd / "loop.py").write_text(LOOP)
        (cwd / "alone.py").write_text(ALONE)
        log = cwd / "events.jsonl"
        records = run_all.write_log(log, args.steps)
        env = run_all.clean_env(PYTHONHASHSEED="0", **({"PYTHONPATH": args.src} if args.src else {}))
        if args.alone:
            got = run_all.callgrind_instructions(
                [run_all.OUR_PY, "alone.py", str(log)], env, cwd, cwd / "cg"
            )
            if got is None:
                return 1
            print(f"{records:,} records; the history alone, fed the replay's calls: "
                  f"{got[1]:,} ({got[1] / records:,.0f} a record)")
            return 0
        counts = {}
        for mode in MODES:
            got = run_all.callgrind_instructions(
                [run_all.OUR_PY, "loop.py", str(log), mode], env, cwd, cwd / "cg"
            )
            if got is None:
                return 1
            counts[mode] = got[1]
    history, observed = counts["history"] - counts["null"], counts["null"] - counts["bare"]
    print(f"{records:,} records; the replay: with the history {counts['history']:,}, with the "
          f"null observer {counts['null']:,}, without observers {counts['bare']:,}")
    print(f"the history: {history:,} ({history / records:,.0f} a record); any observer's points, "
          f"cut and samples: {observed:,} ({observed / records:,.0f} a record)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
