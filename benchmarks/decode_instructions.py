"""Instructions a replay's decode stage costs a record (`runlog.typed.typed_many`).

    PYTHONHASHSEED=0 .venv/bin/python benchmarks/decode_instructions.py [--steps 20000] [--src DIR]
    PYTHONHASHSEED=0 .venv/bin/python benchmarks/decode_instructions.py --processes 32

The benchmark's log (`run_all.write_log`) is read in blocks and split into lines as `replay`
does, twice under callgrind: once handing each block to `typed_many` (the typed msgspec records,
orjson and the decoder's checks for the others, the `Ledger`), once only splitting it. The
difference over the log's records is `profile_replay.py`'s decode stage counted instead of timed:
deterministic to a few instructions a record with `PYTHONHASHSEED=0`, where the timed stage moves
by tens of percent on a shared box. `--src` counts another tree's `src/` (a before and after on
one machine). `--processes N` gives each step's phase, step and metric to the next of N processes
(ranks 0..N-1) in turn: the `Ledger`'s counters of many processes, interleaved record by record.
A benchmark, not a test: nothing here asserts.
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
from io import BytesIO
from pathlib import Path
from trainmeter.runlog.decode import Decoder
from trainmeter.runlog.replay import BLOCK
from trainmeter.runlog.typed import typed_many
path, decode = Path(sys.argv[1]), sys.argv[2] == "decode"
def run():
    decoder = Decoder()
    n = 0
    with open(path, "rb") as fh:
        rest = b""
        while block := fh.read(BLOCK):
            lines = BytesIO(rest + block).readlines()  # as `replay` splits them
            rest = b"" if lines[-1][-1:] == b"\n" else lines.pop()
            n += len(typed_many(decoder, lines)) if decode else len(lines)
    return n, decoder
run()  # imports, caches, orjson loaded
print("READY", flush=True); sys.stdin.readline()
n, decoder = run()
print("END", flush=True); sys.stdin.readline()
print("RECORDS", n, decoder.lines, decoder.good, decoder.skipped, file=sys.stderr)
"""


def _spread(log: Path, processes: int) -> None:
    """The agent's records of each step (its phase, step and metric) from the next process."""
    out, i = [], 0
    mine = b'"rank":0,"pid":100,'
    for line in log.read_bytes().splitlines(keepends=True):
        if b'"kind":"phase"' in line:
            i = (i + 1) % processes
        if mine in line and b'"src":"tm"' not in line and b'"kind":"hello"' not in line:
            line = line.replace(mine, b'"rank":%d,"pid":%d,' % (i, 100 + i))
        out.append(line)
    log.write_bytes(b"".join(out))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--src", help="count this trainmeter instead (another tree's src/), "
                        "for a before and after on one machine")
    args = parser.parse_args()
    if not run_all.have_callgrind():
        sys.exit("valgrind (callgrind) is not installed")
    with tempfile.TemporaryDirectory(prefix="tm-bench-decode-") as tmp:
        cwd = Path(tmp)
        (cwd / "loop.py").write_text(LOOP)
        log = cwd / "events.jsonl"
        records = run_all.write_log(log, args.steps)
        if args.processes > 1:
            _spread(log, args.processes)
        env = run_all.clean_env(
            PYTHONHASHSEED="0", **({"PYTHONPATH": args.src} if args.src else {})
        )
        counts = {}
        for mode in ("decode", "split"):
            got = run_all.callgrind_instructions(
                [run_all.OUR_PY, "loop.py", str(log), mode], env, cwd, cwd / "cg"
            )
            if got is None:
                return 1
            counts[mode] = got[1]
    per = (counts["decode"] - counts["split"]) / records
    print(f"{records:,} records ({args.processes} processes): read, split and decode {counts['decode']:,} instructions; "
          f"read and split {counts['split']:,}; the decode stage {per:,.0f} a record")
    return 0


if __name__ == "__main__":
    sys.exit(main())
