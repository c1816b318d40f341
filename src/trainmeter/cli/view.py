"""`tm view [RUN ...] [--port N]`: a finished run in the dashboard.

The run's log is replayed through the same engine as `tm summary` (so the page shows the very
numbers `tm summary --json` prints) and served on 127.0.0.1 until Ctrl-C. Several run
directories are the nodes of one job: they are joined as `tm summary DIR1 DIR2` joins them
(`runlog.replay_many.replay_job`), and the curves are the job clock's node's (global rank 0),
as the joined snapshot's steps and loss are.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

from ..snapread import get

USAGE = """\
usage: tm view [RUN ...] [--port N]
  RUN       a run directory, or a name or prefix under .trainmeter/runs (default: the latest);
            several: the nodes of one multi-node job, shown as one run
  --port N  the first port to try (default 8765; 0 takes any free port)
Serves the run's dashboard on 127.0.0.1 until Ctrl-C.
"""


def _parse(argv: list[str]) -> tuple[list[str], int | None]:
    from .runarg import split_args
    from .web_runs import parse_port

    specs, opts = split_args("view", argv, set(), {"--port"}, max_runs=len(argv))
    return specs, parse_port(opts.get("--port"))


def main(argv: list[str], stop: threading.Event | None = None) -> int:
    from .runarg import run_command

    return run_command("view", lambda args: _main(args, stop), argv)


def _main(argv: list[str], stop: threading.Event | None) -> int:
    if "-h" in argv or "--help" in argv:
        print(USAGE, end="")
        return 0
    specs, port = _parse(argv)
    from ..runlog.runs import RunNotFound, resolve_run
    from ..views.web.server import serve
    from ..views.web.state import DashboardState
    from .web_runs import serve_until_stopped

    try:
        run_dirs = [resolve_run(spec) for spec in specs] if specs else [resolve_run(None)]
        if len(set(run_dirs)) < len(run_dirs):
            print("tm view: the same run is named twice", file=sys.stderr)
            return 2
        loaded = _load_one(run_dirs[0]) if len(run_dirs) == 1 else _load_job(run_dirs)
    except RunNotFound as exc:
        print(f"tm view: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"tm view: cannot read the run log ({exc})", file=sys.stderr)
        return 1
    snap, history, shown = loaded
    run_dir = run_dirs[0]
    state = DashboardState(mode="view", run_dir=shown, history=history)
    state.on_finish(snap)
    try:
        server = serve(state, port)
    except OSError as exc:
        print(f"tm view: cannot serve the dashboard: {exc}", file=sys.stderr)
        return 1
    name = run_dir.name if len(run_dirs) == 1 else f"{len(run_dirs)} nodes ({run_dir.name}, ...)"
    print(f"tm view: {name} at {server.url} (Ctrl-C to stop)", file=sys.stderr, flush=True)
    return serve_until_stopped(server, stop)


def _load_one(run_dir: Path) -> tuple[dict[str, Any], Any, str]:
    """(snapshot, history, directory shown) of one run, replayed."""
    from ..views.web.replay import replay_with_history

    result, history = replay_with_history(run_dir / "events.jsonl")
    if result.bad:
        print(f"tm view: {result.bad} of {result.lines} lines skipped", file=sys.stderr)
    return result.snapshot, history, str(run_dir)


def _load_job(run_dirs: list[Path]) -> tuple[dict[str, Any], Any, str]:
    """(the job's snapshot, the job clock's node's history, the directories shown).

    The snapshot is `replay_job`'s, the very one `tm summary DIR1 DIR2 --json` prints; the
    curves come from the node holding global rank 0, whose steps and loss the snapshot shows."""
    from ..runlog.replay_many import replay_job
    from ..views.web.replay import replay_with_history

    snap = replay_job(run_dirs)
    lead = run_dirs[0]
    for node in get(snap, "job.node_list") or []:
        if 0 in (node.get("ranks") or []):
            lead = Path(node["run_dir"])
            break
    _result, history = replay_with_history(lead / "events.jsonl")
    return snap, history, ", ".join(str(d) for d in run_dirs)
