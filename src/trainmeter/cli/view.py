"""`tm view [RUN] [--port N] [--no-open]`: a finished run in the dashboard.

The run's log is replayed through the same engine as `tm summary` (so the page shows the very
numbers `tm summary --json` prints) and served on 127.0.0.1 until Ctrl-C.
"""

from __future__ import annotations

import sys
import threading

USAGE = """\
usage: tm view [RUN] [--port N]
  RUN       a run directory, or a name or prefix under .trainmeter/runs (default: the latest)
  --port N  the first port to try (default 8765; 0 takes any free port)
Serves the run's dashboard on 127.0.0.1 until Ctrl-C.
"""


def _parse(argv: list[str]) -> tuple[str | None, int | None] | int:
    spec: str | None = None
    port: int | None = None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-h", "--help"):
            print(USAGE, end="")
            return 0
        if arg == "--port" or arg.startswith("--port="):
            if "=" in arg:
                value = arg.split("=", 1)[1]
            elif i + 1 < len(argv):
                i += 1
                value = argv[i]
            else:
                print("tm view: --port needs a number", file=sys.stderr)
                return 2
            if not value.isdigit() or int(value) > 65535:
                print(f"tm view: --port: {value!r} is not a port number (0-65535)", file=sys.stderr)
                return 2
            port = int(value)
        elif arg.startswith("-"):
            print(f"tm view: unknown option {arg!r}", file=sys.stderr)
            return 2
        elif spec is None:
            spec = arg
        else:
            print(f"tm view: one run at a time ({spec!r} and {arg!r})", file=sys.stderr)
            return 2
        i += 1
    return spec, port


def main(argv: list[str], stop: threading.Event | None = None) -> int:
    parsed = _parse(argv)
    if isinstance(parsed, int):
        return parsed
    spec, port = parsed
    from ..supervisor.replay import RunNotFound, resolve_run
    from ..views.web.replay import replay_with_history
    from ..views.web.server import serve
    from ..views.web.server import stop as stop_server
    from ..views.web.state import DashboardState

    try:
        run_dir = resolve_run(spec)
        result, history = replay_with_history(run_dir / "events.jsonl")
    except RunNotFound as exc:
        print(f"tm view: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"tm view: cannot read the run log ({exc})", file=sys.stderr)
        return 1
    if result.bad:
        print(f"tm view: {result.bad} of {result.lines} lines skipped", file=sys.stderr)
    state = DashboardState(mode="view", run_dir=str(run_dir), history=history)
    state.on_finish(result.snapshot)
    try:
        server = serve(state, port)
    except OSError as exc:
        print(f"tm view: cannot serve the dashboard: {exc}", file=sys.stderr)
        return 1
    print(f"tm view: {run_dir.name} at {server.url} (Ctrl-C to stop)", file=sys.stderr, flush=True)
    stop = stop or threading.Event()
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        stop_server(server)
    return 0
