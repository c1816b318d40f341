"""What the commands about finished runs share: naming a run, replaying it, failing in one line.

`tm passport`, `tm export`, `tm report`, `tm compare` all take runs named the same way (see
`runlog.runs.resolve_run`) and all rebuild the snapshot from the log rather than trusting a
`summary.json` that a crash may have left out.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from .args import port_number  # noqa: F401 - the commands' shared parsers import it from here


class CommandError(Exception):
    """Bad input: the message is the one line printed; the command exits 2."""



def loaded_run(spec: str | None) -> tuple[Path, dict[str, Any]]:
    """The run `spec` names and its snapshot replayed from `events.jsonl`."""
    from ..runlog.replay import replay
    from ..runlog.runs import RunNotFound, resolve_run

    try:
        run_dir = resolve_run(spec)
    except RunNotFound as exc:
        raise CommandError(str(exc)) from None
    try:
        result = replay(run_dir / "events.jsonl")
    except OSError as exc:
        raise CommandError(f"cannot read the run log of {run_dir.name} ({exc.strerror})") from None
    return run_dir, result.snapshot


def run_command(name: str, body: Any, argv: list[str]) -> int:
    """Call `body(argv)`; a `CommandError` is one line and exit 2; a closed pipe is fine."""
    try:
        return int(body(argv) or 0)
    except CommandError as exc:
        print(f"tm {name}: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `tm passport | head`: the reader left
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except OSError:
            pass
        return 0


def split_args(
    name: str, argv: list[str], flags: set[str], valued: set[str], max_runs: int = 1
) -> tuple[list[str], dict[str, Any]]:
    """Positional run names and options: `--flag`, `--opt VALUE` or `--opt=VALUE`."""
    runs: list[str] = []
    opts: dict[str, Any] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        key, eq, inline = arg.partition("=")
        if key in valued:
            if eq:
                opts[key] = inline
            elif i + 1 < len(argv):
                i += 1
                opts[key] = argv[i]
            else:
                raise CommandError(f"{key} needs a value")
        elif arg in flags:
            opts[arg] = True
        elif arg.startswith("-") and arg != "-":
            raise CommandError(f"unknown option {arg!r} (tm {name} --help)")
        else:
            runs.append(arg)
        i += 1
    if len(runs) > max_runs:
        raise CommandError(f"too many runs named ({' '.join(runs)}); it takes {max_runs}")
    return runs, opts
