"""`tm script.py [args]` and `tm [options] -- command`: run a training command under watch.

This module is what `tm` imports on every run, so it imports only the argument parser up front;
the supervisor (sockets, threads, the engine) is imported once we know there is something to run.
"""

from __future__ import annotations

import os
import sys

from ..records import ENV_SOCKET
from .args import RunOptions, UsageError, parse_run_args, usage

TYPE_CHECKING = False  # typing and pathlib cost milliseconds before the child starts
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

#: Whether this process supervised a run: `cli.main.entry` may then leave without the
#: interpreter's teardown (everything the run wrote is closed by then).
supervised = False


def passthrough(opts: RunOptions) -> int:
    """Already inside a `tm` run (TRAINMETER_SOCKET is set): run the command untouched.

    The outer `tm` watches it already; a second run directory would count everything twice.
    """
    command = opts.command
    from ..supervisor.launcher import LaunchError, check_script

    try:
        check_script(command, opts.script)  # `tm -- tm nosuch.py`: 127, as outside a run
    except LaunchError as exc:
        print(exc.message, file=sys.stderr)
        return exc.status
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvp(command[0], command)
    except FileNotFoundError:
        print(f"tm: {command[0]}: command not found", file=sys.stderr)
        return 127
    except OSError as exc:
        print(f"tm: {command[0]}: cannot run ({exc.strerror})", file=sys.stderr)
        return 126
    return 0  # not reached: exec replaced this process


def _make_observers(opts: RunOptions, run_dir: Path | None, warn: Any, stderr: Any) -> list[Any]:
    """The live views of this run (`views/observers.py`), imported once the child is running."""
    from ..views.observers import make_observers

    return make_observers(opts, run_dir, warn, stderr)


def _end_line(snap: dict[str, Any], run_dir: Path | None, elapsed_s: float | None) -> str:
    """The one line on stderr when the run ends (`views/terminal.py`), imported at the end."""
    from ..views.terminal import summary_line

    return summary_line(snap, run_dir, elapsed_s)


def main(argv: list[str]) -> int:
    if not argv:
        print(usage(), end="", file=sys.stderr)
        return 2
    try:
        opts = parse_run_args(argv)
    except UsageError as exc:
        print(f"tm: {exc}", file=sys.stderr)
        return 2
    if opts.show == "help":
        print(usage(), end="")
        return 0
    if opts.show == "version":
        from .. import __version__

        print(f"tm {__version__}")
        return 0
    if os.environ.get(ENV_SOCKET):
        return passthrough(opts)
    from ..supervisor.session import supervise

    global supervised
    status = supervise(opts, make_observers=_make_observers, end_line=_end_line)
    supervised = True
    return status
