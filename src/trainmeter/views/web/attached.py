"""The dashboard for `tm attach`: what the samplers see of a program tm did not start.

`tm attach` writes its records itself (there is no recorder or live loop), so this feeds each
written record to an engine, and the points it takes to the bounded history, and takes a snapshot at each sampling
round, as the live loop would. The page is the same; what it shows is what an observe-only
run has (GPU, process tree, node), with every training number absent and its reason.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from .server import DashboardServer, serve, stop
from .state import DashboardState


class AttachedDashboard:
    def __init__(self, port: int | None, run_dir: Path, stderr: Any = None) -> None:
        from ...runlog import engine_load
        from ...runlog.warn import WarnOnce

        warn = WarnOnce(stderr)
        factory, _ = engine_load.load_engine_factory(warn)
        self.engine, _ = engine_load.make_engine(factory, warn)
        if self.engine is not None:
            self.engine.take_points()  # the engine keeps the points the page draws from here on
        self.state = DashboardState(mode="live", run_dir=str(run_dir))
        self.server: DashboardServer = serve(self.state, port)
        print(f"tm attach: dashboard {self.server.url}", file=stderr or sys.stderr, flush=True)

    def record(self, record: dict[str, Any]) -> None:
        if self.engine is None:
            return
        try:
            self.engine.feed(record)
            points = self.engine.take_points()
        except Exception:  # noqa: BLE001 - the log has it; the page only misses it
            return
        self.state.on_points(points, self.engine.t0)

    def tick(self, now: float) -> None:
        if self.engine is not None:
            self.state.on_snapshot(self.engine.snapshot(now=now), now)

    def finish(self) -> None:
        if self.engine is not None:
            self.state.on_finish(self.engine.snapshot(now=None))
        stop(self.server)
