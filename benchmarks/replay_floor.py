"""How far the replay row can go while every record is parsed in Python: its floor.

    TRAINMETER_PEER_VENV=/tmp/peer .venv/bin/python benchmarks/replay_floor.py [--steps 20000,200000] [--pairs 5]

The replay row of `run_all.py` times a fresh process that imports our replay and the history
and replays the benchmark's log through them (`REPLAY_OURS`), beside the peer doing the same
with its engine (`REPLAY_PEER`). Here, in the same interleaved runs, two more of our processes
do only what no replay of a JSON-lines log can skip:

- **imports**: the row's two imports, and nothing read;
- **parse**: the same imports, then the log read in blocks and split as `replay` splits it, and
  every line parsed by the typed decoder's msgspec union (`runlog.typed`), with nothing after
  it: no plausibility budgets, no recorder, no engine, no history, no snapshots.

- **samples**: the row's replay whole, untimed, then as many samples as it handed the history
  (`Engine.sample` with the history's keys, as `replay` asks for them), timed, each on the
  engine's final state: what the row's ~2,000 samples cost by themselves, with every record's
  own work already done (the folds a sample does of the records since the one before are left
  to the records' side).

`peer ÷ floor` is the peer's seconds over the parse floor's: the ratio the row would show if
the ledger, the engine, the history and the ~2,000 snapshots cost nothing at all.
`peer ÷ (floor + samples)`: the same, with the samples paid and every record's work after the
parse still free. Where it is
near the goal, no trimming of the stages after the parse can reach the goal; only doing less
than parse every line (a checkpoint, a compiled engine) can. Wall seconds of each whole process
after the interpreter's start, as the row measures them; the median over the pairs. A
benchmark: nothing here asserts.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_all  # noqa: E402 - the row's log, scripts and process driver

IMPORTS = r"""
import json, sys, time
t0 = time.perf_counter()
from trainmeter.runlog.replay import replay
from trainmeter.views.history import History
print("BENCH " + json.dumps({"s": time.perf_counter() - t0}))
"""

PARSE = r"""
import json, sys, time
from io import BytesIO
t0 = time.perf_counter()
from trainmeter.runlog.replay import BLOCK, replay
from trainmeter.views.history import History
from trainmeter.runlog import typed
decode, errors = typed._DECODE, typed._ERRORS
n = bad = 0
with open(sys.argv[1], "rb") as fh:
    rest = b""
    while block := fh.read(BLOCK):
        lines = BytesIO(rest + block).readlines()
        rest = b"" if lines[-1][-1:] == b"\n" else lines.pop()
        for line in lines:
            try:
                decode(line)
                n += 1
            except errors:
                bad += 1  # a rare kind: the decoder's other path, not timed here
print("BENCH " + json.dumps({"s": time.perf_counter() - t0, "typed": n, "other": bad}))
"""

SAMPLES = r"""
import json, sys, time
from pathlib import Path
from trainmeter.engine import Engine
from trainmeter.runlog.replay import replay
from trainmeter.views.history import History
made = []
def factory():
    made.append(Engine())
    return made[-1]
class Count:
    reads = History.reads
    n = 0
    def on_snapshot(self, snap, now):
        Count.n += 1
history = History()
replay(Path(sys.argv[1]), engine_factory=factory, observers=[history, Count()],
       max_snapshots=2000, resume=False)
engine, n = made[-1], Count.n
now = engine.t_last
t0 = time.perf_counter()
for _ in range(n):
    engine.sample(now, History.reads)
print("BENCH " + json.dumps({"s": time.perf_counter() - t0, "samples": n}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="20000,200000", help="comma list of log sizes")
    parser.add_argument("--pairs", type=int, default=5)
    args = parser.parse_args()
    run_all.compile_ours()
    print(
        "| log | records | peer s | ours s | row ratio | imports s | parse floor s | peer ÷ floor "
        "| samples s | peer ÷ (floor + samples) |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for steps in [int(s) for s in args.steps.split(",") if s]:
        with tempfile.TemporaryDirectory(prefix="tm-replay-floor-") as tmp:
            log = Path(tmp) / "events.jsonl"
            total = run_all.write_log(log, steps)
            cells: dict[str, list[float]] = {
                "peer": [], "ours": [], "imports": [], "parse": [], "samples": []
            }
            n_samples = 0
            for _ in range(args.pairs):
                runs = {
                    "ours": [run_all.OUR_PY, "-c", run_all.REPLAY_OURS, str(log), "2000", str(total)],
                    "imports": [run_all.OUR_PY, "-c", IMPORTS],
                    "parse": [run_all.OUR_PY, "-c", PARSE, str(log)],
                    "samples": [run_all.OUR_PY, "-c", SAMPLES, str(log)],
                }
                if run_all.have_peer():
                    runs["peer"] = [str(run_all.PEER_PY), "-c", run_all.REPLAY_PEER, str(log), "2000", str(total)]
                for name, argv in runs.items():
                    out = run_all.run_bench(argv, Path(tmp), run_all.clean_env())
                    if out:
                        cells[name].append(out["s"])
                        n_samples = out.get("samples", n_samples)
            med = {k: statistics.median(v) if v else None for k, v in cells.items()}

            def ratio(a: float | None, b: float | None) -> str:
                return f"{a / b:.2f}" if a and b else "-"

            def sec(x: float | None) -> str:
                return f"{x:.3f}" if x is not None else "-"

            print(
                f"| {steps // 1000}k steps | {total:,} | {sec(med['peer'])} | {sec(med['ours'])} | "
                f"{ratio(med['peer'], med['ours'])} | {sec(med['imports'])} | {sec(med['parse'])} | "
                f"{ratio(med['peer'], med['parse'])} | {sec(med['samples'])} ({n_samples:,}) | "
                f"{ratio(med['peer'], (med['parse'] or 0) + (med['samples'] or 0))} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
