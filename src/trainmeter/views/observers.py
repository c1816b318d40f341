"""Which live views watch a run: the one place each view registers itself.

`tm` calls `make_observers` once, before the child starts, and feeds what it returns through
`runlog.observers.ObserverSet` (records, a snapshot a second, the final snapshot). Each view
is imported only when it is asked for, so a plain `tm -q --no-web` run pays for none of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def make_observers(opts: Any, run_dir: Path | None, warn: Any, stderr: Any = None) -> list[Any]:
    """The live views for this run, from its options (`RunOptions`)."""
    observers: list[Any] = []
    # Each view adds itself here, behind its own option, e.g.:
    #   if opts.web: observers.append(Dashboard(...))
    if run_dir is not None:  # the passport is written at the end of every run
        from .passport_files import PassportWriter

        observers.append(PassportWriter(run_dir, warn))
    if not getattr(opts, "quiet", False):  # -q: no status line, and no import for one
        from . import live_status  # the status line: a terminal on stderr and no -q

        status = live_status.make(opts, stderr)
        if status is not None:
            observers.append(status)
    if getattr(opts, "metrics_addr", None):
        observers.extend(_metrics_server(opts, run_dir, warn))
    if getattr(opts, "notify", None):  # webhooks: posted by tm, from a thread of its own
        from .notify import Notifier

        observers.append(Notifier(list(opts.notify), run_dir, warn))
    if getattr(opts, "web", False):
        from .web.live import make as make_web

        web = make_web(opts, run_dir, warn, stderr)
        if web is not None:
            observers.append(web)
    return observers


def _metrics_server(opts: Any, run_dir: Path | None, warn: Any) -> list[Any]:
    """Prometheus `/metrics` alone on `--metrics-addr` (exporters/prometheus.py)."""
    host, port = opts.metrics_addr
    try:
        from ..exporters.prometheus import MetricsServer

        server = MetricsServer((host, port), run_dir)
    except (OSError, ImportError) as exc:
        warn("metrics", f"--metrics-addr {host}:{port}: /metrics is not served ({exc})")
        return []
    if not opts.quiet:
        shown = f"[{host}]" if ":" in host else host
        warn("metrics-at", f"Prometheus metrics at http://{shown}:{server.address[1]}/metrics")
    return [server]
