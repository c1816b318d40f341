"""Instructions a record costs the recorder and the engine in a replay, by kind (callgrind).

    PYTHONHASHSEED=0 .venv/bin/python benchmarks/engine_instructions.py
    .venv/bin/python benchmarks/engine_instructions.py --kinds step,metric --n1 300 --n2 1500

The benchmark's log (`run_all.write_log`, `--steps` steps) is decoded once as a replay decodes
it (`typed_many`), then the records before its first step (run.start, hello, facts) and a
number of the log's records are fed to a fresh engine through a `Recorder`, in the replay's
blocks (those the log's 16 kB reads give, `--block` records), under callgrind. Two ways:

- `kind` (each kind in `--kinds`): the first N1, then the first N2 records of that kind alone;
  (I(N2) - I(N1)) / (N2 - N1) is what one more record of it costs (the way the engine's last
  round measured it, benchmarks/README.md);
- `log`: the first N1, then N2 records of the log as it is, every kind in its order: the
  difference over the log's steps between them is what a step of the log costs (its step,
  metric and phase records and its share of the samplers' readings).

Each count is one process run under `valgrind --tool=callgrind` with PYTHONHASHSEED fixed
(the count moves with a seed's string hashes), the decode included in both and so cancelled.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def feed(log_steps: int, kind: str, n: int, block: int) -> None:
    """The measured body: decode the log, feed `n` records (of `kind`, or of the log)."""
    sys.path.insert(0, str(HERE))
    from run_all import write_log

    from trainmeter.engine import Engine
    from trainmeter.runlog.decode import Decoder
    from trainmeter.runlog.recorder import Recorder
    from trainmeter.runlog.store import RunStore
    from trainmeter.runlog.typed import typed_many

    with tempfile.TemporaryDirectory(prefix="tm-instr-") as tmp:
        log = Path(tmp) / "events.jsonl"
        write_log(log, log_steps)
        pairs = typed_many(Decoder(), log.read_bytes().splitlines())
    first = next(i for i, (_, r) in enumerate(pairs) if r["kind"] == "step")
    prefix, rest = pairs[:first], pairs[first:]
    chosen = rest[:n] if kind == "log" else [p for p in rest if p[1]["kind"] == kind][:n]
    if len(chosen) < n:
        raise SystemExit(f"only {len(chosen)} records of {kind} in a {log_steps}-step log")
    recorder = Recorder(RunStore(lambda *a: None), lambda *a: None)
    recorder.attach_engine(Engine())
    recorder.accept_many(prefix)
    for i in range(0, len(chosen), block):
        recorder.accept_many(chosen[i : i + block])


def count(args: argparse.Namespace, kind: str, n: int) -> int:
    with tempfile.TemporaryDirectory(prefix="tm-cg-") as tmp:
        out = Path(tmp) / "cg.out"
        cmd = [
            "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
            sys.executable, __file__, "--body", kind, str(n), "--steps", str(args.steps),
            "--block", str(args.block),
        ]
        env = {**os.environ, "PYTHONHASHSEED": str(args.seed)}
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
        found = re.search(r"Collected : (\d+)", done.stderr)
        if found is None:
            raise SystemExit(done.stderr[-2000:])
        return int(found.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", default="step,metric,phase,sample.gpu,sample.host,sample.node,log")
    parser.add_argument("--steps", type=int, default=2000, help="steps of the decoded log")
    parser.add_argument("--n1", type=int, default=300)
    parser.add_argument("--n2", type=int, default=1500)
    parser.add_argument("--block", type=int, default=100, help="records a block, as a replay's")
    parser.add_argument("--seed", type=int, default=0, help="PYTHONHASHSEED")
    parser.add_argument("--body", nargs=2, metavar=("KIND", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.body:
        feed(args.steps, args.body[0], int(args.body[1]), args.block)
        return 0
    print("| kind | N1 -> N2 | instructions a record |")
    print("| --- | --- | --- |")
    for kind in args.kinds.split(","):
        n1, n2 = args.n1, args.n2
        if kind.startswith("sample."):  # one a second of the run: a tenth of the steps
            n1, n2 = n1 // 10, n2 // 10
        steps = n2 - n1
        if kind == "log":  # the log's records: 33 every 10 steps (a step, metric, phase each)
            n1, n2 = n1 * 33 // 10, n2 * 33 // 10
        a, b = count(args, kind, n1), count(args, kind, n2)
        per = (b - a) / (steps if kind == "log" else n2 - n1)
        label = "a step of the log" if kind == "log" else "a record"
        print(f"| {kind} ({label}) | {n1} -> {n2} | {per:,.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
