"""`tm runs --web` and `tm compare A B ... --web`: the runs page served until Ctrl-C.

Both serve the same site (`views/web/runs_site.py`): the runs under `.trainmeter/runs` and any
run named; `tm compare --web` prints the address of its comparison, `tm runs --web` that of the
list. On 127.0.0.1 only, as the dashboard. `tm view` parses its port and waits for Ctrl-C with
the same two functions.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

from .runarg import CommandError, port_number


def parse_port(value: str | None) -> int | None:
    """`--port`'s value (None when not given); a refusal is a `CommandError`."""
    if value is None:
        return None
    port = port_number(value)
    if port is None:
        raise CommandError(f"--port: {value!r} is not a port number (0-65535)")
    return port


def serve(command: str, extra: list[Path], port: int | None, path: str = "",
          stop: threading.Event | None = None) -> int:
    """Serve the runs page (and `path` under it) until Ctrl-C or `stop`."""
    from ..runlog.runs import runs_root
    from ..views.web.runs_site import RunsSite, serve_runs

    site = RunsSite(runs_root(), extra)
    try:
        server = serve_runs(site, port)
    except OSError as exc:
        print(f"tm {command}: cannot serve the runs page: {exc}", file=sys.stderr)
        return 1
    print(f"tm {command}: {server.url}{path} (Ctrl-C to stop)", file=sys.stderr, flush=True)
    return serve_until_stopped(server, stop)


def serve_until_stopped(server: Any, stop: threading.Event | None) -> int:
    """Wait for Ctrl-C (or `stop`, set by a test), then stop `server`; exit status 0."""
    from ..views.web.server import stop as stop_server

    stop = stop or threading.Event()
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        stop_server(server)
    return 0
