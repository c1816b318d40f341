"""What a columnar replay would pay a record before doing any of the replay's work.

    .venv/bin/python benchmarks/replay_columns_floor.py [--steps 20000] [--runs 5]

`replay_floor.py` shows what 10 × the peer leaves each record's work after the parse (the
plausibility budgets, the recorder, the engine's parts, the history's points): 0.39 µs a record
on the 20k-step log. The fastest shape that work could take in CPython touches each record only
through C builtins, a block at a time: the block's typed records split by kind with one list
comprehension per kind, then each field the engine reads pulled out as a column with
`map(attrgetter(...))`, the token counts summed with `accumulate`. This script times exactly
that on the replay row's log, already parsed (the parse is not timed), and nothing else: no
check, no rule, no engine, no history. Beside it, the cheapest Python loop there is: one pass
over the same records testing each one's type.

If the first figure is near the budget, no Python replay reaches the row's goal, however it is
arranged. CPU seconds of this process, the best of `--runs`. A benchmark: nothing here asserts.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from io import BytesIO
from itertools import accumulate
from operator import attrgetter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from profile_replay import best  # noqa: E402 - CPU seconds, the best of n runs
from run_all import write_log  # noqa: E402 - the replay row's log

from trainmeter.runlog import typed  # noqa: E402
from trainmeter.runlog.replay import BLOCK  # noqa: E402


def parsed_blocks(path: Path) -> list[list[Any]]:
    """The log's typed records, a block of `BLOCK` bytes at a time, as `replay` reads them."""
    decode, errors = typed._DECODE, typed._ERRORS
    blocks = []
    with open(path, "rb") as fh:
        rest = b""
        while block := fh.read(BLOCK):
            lines = BytesIO(rest + block).readlines()
            rest = b"" if lines[-1][-1:] == b"\n" else lines.pop()
            records = []
            for line in lines:
                try:
                    records.append(decode(line))
                except errors:
                    pass  # a rare kind: the decoder's other path
            blocks.append(records)
    return blocks


def columns(blocks: list[list[Any]]) -> None:
    """Each block split by kind and the engine's fields pulled out as columns, in C."""
    step, metric, phase = typed.TYPED["step"], typed.TYPED["metric"], typed.TYPED["phase"]
    t_of, d_of = attrgetter("t"), attrgetter("d")
    k_of, tokens_of = attrgetter("k"), attrgetter("tokens")
    key_of, value_of, s_of = attrgetter("key"), attrgetter("value"), attrgetter("s")
    for records in blocks:
        steps = [r for r in records if type(r) is step]
        metrics = [r for r in records if type(r) is metric]
        phases = [r for r in records if type(r) is phase]
        step_d = list(map(d_of, steps))
        list(map(t_of, steps))
        list(map(k_of, step_d))
        list(accumulate(map(tokens_of, step_d)))
        metric_d = list(map(d_of, metrics))
        list(map(t_of, metrics))
        list(map(key_of, metric_d))
        list(map(value_of, metric_d))
        list(map(t_of, phases))
        list(map(s_of, map(d_of, phases)))


def bare(blocks: list[list[Any]]) -> None:
    """One Python loop over the records, testing each one's type: the least a loop does."""
    step = typed.TYPED["step"]
    n = 0
    for records in blocks:
        for r in records:
            if type(r) is step:
                n += 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tm-columns-floor-") as tmp:
        log = Path(tmp) / "events.jsonl"
        total = write_log(log, args.steps)
        blocks = parsed_blocks(log)
    typed_n = sum(map(len, blocks))
    print(f"{total:,} records, {typed_n:,} of them typed; CPU, the best of {args.runs}\n")
    print("| what | ms | µs a record of the log |")
    print("| --- | --- | --- |")
    for name, fn in (("split by kind, fields as columns (C builtins)", columns),
                     ("a bare loop testing each record's type", bare)):
        s = best(fn, blocks, args.runs)
        print(f"| {name} | {s * 1e3:.1f} | {s / total * 1e6:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
