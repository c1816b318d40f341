"""`tm`: the entry point. Dispatches to one module per command, imported only when used.

`tm train.py [args]` and `tm [options] -- cmd ...` run and watch (`cli.run`); a first word that
names a command below goes to that command's module, which exposes `main(argv) -> int`. Keeping
the imports lazy is what keeps `tm`'s own start-up cost low.
"""

from __future__ import annotations

import importlib
import sys

COMMANDS: dict[str, tuple[str, str]] = {
    "summary": ("trainmeter.cli.summary", "rebuild a finished run's summary from its log"),
    "doctor": ("trainmeter.cli.doctor", "what tm can see here, and why anything is missing"),
    "hardware": ("trainmeter.cli.hardware", "the node: GPUs, peaks, CPU, memory, disks, limits"),
    "attach": ("trainmeter.cli.attach", "watch a running program from outside: GPU and host"),
}


#: The first words that are always `tm`'s own commands, whatever is on PATH: a command first,
#: then a `.py` script, then a program (`tm python train.py`, `tm torchrun ...`), else an error.
SUBCOMMANDS = (
    "summary", "view", "top", "attach", "passport", "runs", "compare", "report", "check",
    "export", "doctor", "hardware",
)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in COMMANDS:
        module = importlib.import_module(COMMANDS[args[0]][0])
        return int(module.main(args[1:]) or 0)
    if args and args[0] in SUBCOMMANDS:
        print(f"tm: {args[0]}: this build of tm does not have that command yet", file=sys.stderr)
        return 2
    from . import run

    return int(run.main(args) or 0)
