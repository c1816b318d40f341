"""The dashboard as a live view of a `tm` run: an observer that feeds the served state.

Built before the child starts, so the URL is printed once, at the top of the run, on stderr.
`on_record` only appends to the bounded history (cheap: it runs under the recorder's lock);
`on_snapshot` stores the snapshot and wakes the event streams; `on_finish` shows the final
snapshot. The server lives as long as `tm`: it is a daemon thread and dies with it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from .server import DashboardServer, serve
from .state import DashboardState


class WebDashboard:
    name = "web"

    def __init__(
        self, port: int | None, run_dir: Path | None, stderr: Any = None, quiet: bool = False
    ) -> None:
        self.state = DashboardState(mode="live", run_dir=str(run_dir) if run_dir else None)
        self.server: DashboardServer = serve(self.state, port)
        if not quiet:
            print(f"trainmeter: dashboard {self.server.url}", file=stderr or sys.stderr, flush=True)

    @property
    def url(self) -> str:
        return self.server.url

    def on_record(self, record: dict[str, Any]) -> None:
        self.state.on_record(record)

    def on_snapshot(self, snap: dict[str, Any], now: float) -> None:
        self.state.on_snapshot(snap, now)

    def on_finish(self, snap: dict[str, Any]) -> None:
        self.state.on_finish(snap)


def make(opts: Any, run_dir: Path | None, warn: Any, stderr: Any = None) -> WebDashboard | None:
    """The dashboard for `opts` (`.web`, `.port`), or None with one warning when it cannot bind."""
    if not getattr(opts, "web", True):
        return None
    try:
        return WebDashboard(
            getattr(opts, "port", None), run_dir, stderr, bool(getattr(opts, "quiet", False))
        )
    except OSError as exc:
        warn("web", f"no dashboard: {exc}; the run goes on (--port N picks another port)")
        return None
