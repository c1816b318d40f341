"""`tm`: the entry point. Dispatches to one module per command, imported only when used.

`tm train.py [args]` and `tm [options] -- cmd ...` run and watch (`cli.run`); a first word that
names a command below goes to that command's module, which exposes `main(argv) -> int`. Keeping
the imports lazy is what keeps `tm`'s own start-up cost low.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing costs milliseconds on every run's start-up
if TYPE_CHECKING:
    from typing import Any

#: Each command's one-line description; `_load` imports its module (`main(argv) -> int`).
COMMANDS: dict[str, str] = {
    "summary": "rebuild a finished run's summary from its log",
    "doctor": "what tm can see here, and why anything is missing",
    "hardware": "the node: GPUs, peaks, CPU, memory, disks, limits",
    "attach": "watch a running program from outside: GPU and host",
    "runs": "the runs here: name, start, status, steps, tokens/s, MFU",
    "compare": "two runs side by side, the biggest differences named",
    "export": "a finished run to W&B, CSV or Parquet",
    "report": "a run as one self-contained HTML file, charts included",
    "passport": "a run's passport: what it cost, with provenance",
    "check": "fail a CI job when a run misses its thresholds",
    "top": "a run on one full terminal, live while it runs",
    "view": "a finished run in the web dashboard",
}


def _load(name: str) -> Any:
    """The command's module, imported only when it runs, by a plain import statement each, so
    the import graph (and the layers test) sees every edge."""
    if name == "summary":
        from . import summary as module
    elif name == "doctor":
        from . import doctor as module
    elif name == "hardware":
        from . import hardware as module
    elif name == "attach":
        from . import attach as module
    elif name == "runs":
        from . import runs as module
    elif name == "compare":
        from . import compare as module
    elif name == "export":
        from . import export as module
    elif name == "report":
        from . import report as module
    elif name == "passport":
        from . import passport as module
    elif name == "check":
        from . import check as module
    elif name == "top":
        from . import top as module
    elif name == "view":
        from . import view as module
    else:
        raise KeyError(name)
    return module


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
        return int(_load(args[0]).main(args[1:]) or 0)
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
