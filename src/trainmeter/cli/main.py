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
    "runs": ("trainmeter.cli.runs", "the runs here: name, start, status, steps, tokens/s, MFU"),
    "compare": ("trainmeter.cli.compare", "two runs side by side, the biggest differences named"),
    "export": ("trainmeter.cli.export", "a finished run to W&B, CSV or Parquet"),
    "report": ("trainmeter.cli.report", "a run as one self-contained HTML file, charts included"),
    "passport": ("trainmeter.cli.passport", "a run's passport: what it cost, with provenance"),
    "check": ("trainmeter.cli.check", "fail a CI job when a run misses its thresholds"),
    "top": ("trainmeter.cli.top", "a run on one full terminal, live while it runs"),
    "view": ("trainmeter.cli.view", "a finished run in the web dashboard"),
}


#: The first words that are always `tm`'s own commands, whatever is on PATH: a command first,
#: then a `.py` script, then a program (`tm python train.py`, `tm torchrun ...`), else an error.
SUBCOMMANDS = (
    "summary", "view", "top", "attach", "passport", "runs", "compare", "report", "check",
    "export", "doctor", "hardware",
)  # fmt: skip


def entry() -> None:
    """The `tm` console script (and `python -m trainmeter`): `main`, then leave.

    After a supervised run, everything `tm` wrote is closed and the child is reaped; what the
    interpreter's teardown would still do is free the engine's objects one by one, about 13 ms
    added to every run's wall time here. So a run leaves with `os._exit` once the exit handlers
    have run and stdio is flushed, unless a thread that is not a daemon still runs (the
    interpreter would wait for it: so does `tm`).
    """
    status = main()
    run = sys.modules.get("trainmeter.cli.run")
    if run is not None and run.supervised:
        _leave_now(status)
    sys.exit(status)


def _leave_now(status: int) -> None:
    import atexit
    import os
    import threading

    main_thread = threading.main_thread()
    for thread in threading.enumerate():
        if thread is not main_thread and not thread.daemon and thread.is_alive():
            return  # the interpreter's exit joins it
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed stream: nothing left to lose
            pass
    os._exit(status)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in COMMANDS:
        module = importlib.import_module(COMMANDS[args[0]][0])
        return int(module.main(args[1:]) or 0)
    if args and args[0] in SUBCOMMANDS:
        print(f"tm: {args[0]}: this build of tm does not have that command yet", file=sys.stderr)
        return 2
    if args and _mistyped_command(args[0]):
        return 2
    from . import run

    return int(run.main(args) or 0)


def _mistyped_command(word: str) -> bool:
    """`tm rnus`: neither a command, a script that exists, nor a program on PATH. Say so, and start no run (a run
    directory for a typo would only clutter `tm runs`). Scripts are named with a path or `.py`."""
    import os

    if word.startswith("-") or "/" in word or "." in word or os.path.exists(word):
        return False
    import shutil  # here, not above: every run's start-up would pay it (about 6 ms)

    if shutil.which(word):
        return False  # a program: `tm python train.py`, `tm torchrun ...` run it as after `--`
    import difflib

    close = difflib.get_close_matches(word, list(COMMANDS), n=1)
    hint = f"did you mean tm {close[0]}?" if close else "see tm --help"
    print(f"tm: {word!r} is not a tm command nor a script here ({hint})", file=sys.stderr)
    return True
