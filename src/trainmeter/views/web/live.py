"""The dashboard as a live view of a `tm` run: an observer that feeds the served state.

Built before the child starts, so the address is printed once, at the top of the run, on
stderr. Only the socket is bound then (cheap); the HTTP server is imported and started on a
daemon thread, so the training's start does not wait for it, and a browser that connects
early waits in the socket's backlog. `on_points` only appends to the bounded history (it runs
under the recorder's lock); `on_snapshot` stores the snapshot and wakes the event streams;
`on_finish` shows the final snapshot. The server lives as long as `tm`.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

from .ports import bind_socket, url
from .state import DashboardState

#: The most the end of a run waits for open pages to be handed the final snapshot: a page that
#: reads its stream gets it in a few milliseconds; one that stopped reading is not waited for.
FINAL_WAIT_S = 0.5


class WebDashboard:
    name = "web"

    def __init__(
        self,
        port: int | None,
        run_dir: Path | None,
        stderr: Any = None,
        quiet: bool = False,
        warn: Any = None,
    ) -> None:
        self.state = DashboardState(mode="live", run_dir=str(run_dir) if run_dir else None)
        self._sock = bind_socket(port)
        self.url = url(self._sock)
        self.server: Any = None
        self._warn = warn
        self._lock = threading.Lock()
        self._closed = False
        self.ready = threading.Event()  # the server is up (or failed)
        threading.Thread(target=self._serve, name="trainmeter-web", daemon=True).start()
        if not quiet:
            # one write: an unbuffered print() writes the newline apart, and the training's
            # own output on the same terminal could land between the two
            out = stderr or sys.stderr
            out.write(f"trainmeter: dashboard {self.url}\n")
            out.flush()

    def _serve(self) -> None:
        try:
            from .server import DashboardServer

            with self._lock:
                if self._closed:
                    return
                self.server = DashboardServer(self.state, self._sock)
        except Exception as exc:  # noqa: BLE001 - the run goes on without its page
            if self._warn is not None:
                self._warn("web", f"the dashboard failed to start ({exc!r})")
            self._sock.close()
            return
        finally:
            self.ready.set()
        self.server.serve_forever(poll_interval=0.2)

    def close(self) -> None:
        """Stop serving (tests; `tm` itself just exits)."""
        with self._lock:
            self._closed = True
            server = self.server
        self.state.close()
        if server is not None:
            server.stopping.set()
            server.shutdown()
            server.server_close()
        else:
            self._sock.close()

    def on_points(self, points: list[tuple[Any, ...]], origin: float | None) -> None:
        self.state.on_points(points, origin)

    def on_snapshot(self, snap: dict[str, Any], now: float) -> None:
        self.state.on_snapshot(snap, now)

    def on_finish(self, snap: dict[str, Any]) -> None:
        """The final snapshot, and a short wait until every open page has it (`settle`): `tm`
        exits right after, and a page left with the last live numbers would say "connection
        lost" over them (2 runs of 7 did, before)."""
        self.state.on_finish(snap)
        server = self.server
        if server is not None:
            server.settle(FINAL_WAIT_S)


def make(opts: Any, run_dir: Path | None, warn: Any, stderr: Any = None) -> WebDashboard | None:
    """The dashboard for `opts` (`.web`, `.port`), or None with one warning when it cannot bind."""
    if not getattr(opts, "web", True):
        return None
    try:
        return WebDashboard(
            getattr(opts, "port", None),
            run_dir,
            stderr,
            quiet=bool(getattr(opts, "quiet", False)),
            warn=warn,
        )
    except OSError as exc:
        warn("web", f"no dashboard: {exc}; the run goes on (--port N picks another port)")
        return None
