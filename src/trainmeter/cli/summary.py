"""`tm summary [RUN] [--json]`: a finished (or crashed) run's summary, rebuilt from its log.

The summary is replayed from `events.jsonl`, not read from `summary.json`, so it works for a run
that crashed before writing one and for logs written by an older version.
"""

from __future__ import annotations

import json
import sys

USAGE = """\
usage: tm summary [RUN ...] [--json]
  RUN     a run directory, or a name or prefix under .trainmeter/runs (default: the latest);
          several: the nodes of one multi-node job, shown as one run
  --json  print the snapshot as JSON (what summary.json holds)
"""


def main(argv: list[str]) -> int:
    from .runarg import run_command

    return run_command("summary", _main, argv)  # a closed pipe (`tm summary | head`) is fine


def _main(argv: list[str]) -> int:
    from .runarg import split_args

    if "-h" in argv or "--help" in argv:
        print(USAGE, end="")
        return 0
    runs, opts = split_args("summary", argv, {"--json"}, set(), max_runs=len(argv))
    spec = runs[0] if runs else None
    as_json = bool(opts.get("--json"))
    if len(runs) > 1:  # the other nodes' runs of the same job
        from .summary_job import main_job

        return main_job(runs, as_json)

    from ..runlog.replay import replay
    from ..runlog.runs import RunNotFound, resolve_run

    try:
        run_dir = resolve_run(spec)
        result = replay(run_dir / "events.jsonl")
    except RunNotFound as exc:
        print(f"tm summary: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"tm summary: cannot read the run log ({exc})", file=sys.stderr)
        return 1
    notes = []
    if result.bad:
        reasons = ", ".join(f"{n} {why}" for why, n in sorted(result.bad_reasons.items()))
        notes.append(f"{result.bad} of {result.lines} lines skipped ({reasons})")
    if not result.finished:
        notes.append("no run.end in the log: the run did not finish cleanly, or is still running")
    for note in notes:
        print(f"tm summary: {note}", file=sys.stderr)
    if as_json:
        print(json.dumps(result.snapshot, allow_nan=False, indent=2), flush=True)
        return 0
    from ..views.terminal_console import make_console
    from ..views.terminal_summary import render
    from ..visible import visible, visible_all

    # the run's own text (keys, names) reaches the terminal as characters, never as commands
    render(make_console(sys.stdout), visible_all(result.snapshot), visible(str(run_dir)))
    sys.stdout.flush()
    return 0
