"""What a supervised run says about itself: `run.start`'s payload and `meta.json`.

Both carry the same description of the run (its name, the redacted command, the versions, the
declared facts); `run.start` adds the clocks and the job's identity, `meta.json` the start and,
at the end, how the run ended. Nothing here is imported before the child starts but what the
session itself needs (`prepare` runs while the child boots).
"""

from __future__ import annotations

import os
import sys
import time
from _socket import gethostname  # socket.gethostname, without socket.py's import

from .. import __version__, records

TYPE_CHECKING = False  # what only annotations need: imported by type checkers, not by a run
if TYPE_CHECKING:
    from datetime import datetime
    from typing import Any

    from ..runlog.store import RunStore
    from .options import RunOptions


def node_uptime_s() -> float | None:
    """Seconds since the node booted: how long the rented machine has been paid for."""
    try:
        with open("/proc/uptime", encoding="ascii") as fh:
            return float(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    try:
        import psutil

        return max(time.time() - psutil.boot_time(), 0.0)
    except Exception:  # noqa: BLE001 - psutil absent or refused: uptime stays unknown
        return None


def about(name: str, opts: RunOptions, store: RunStore | None) -> dict[str, Any]:
    """What both `run.start` and `meta.json` say about the run."""
    return {
        "name": name,
        "argv": records.redact_argv(opts.command),
        "tm_version": __version__,
        "hostname": gethostname(),
        "python": sys.version.split()[0],  # platform.python_version(), without its import
        "run_dir": str(store.path) if store and store.path else None,
        "declared": dict(opts.declared),
        "declared_notes": dict(opts.notes),
    }


def start_payload(described: dict[str, Any], opts: RunOptions) -> dict[str, Any]:
    """`run.start`'s `d`: the run's description, the node's uptime, the clocks, the job."""
    from . import job

    return {
        **described,
        "node_uptime_s": node_uptime_s(),
        "unix_time": time.time(),
        "clock": job.clock_pair(),
        "job": job.identity(opts.run_id, opts.command, os.environ),
        "agent": opts.agent,
        "tap": opts.tap,
    }


def meta(
    described: dict[str, Any], started_utc: datetime, end: dict[str, Any] | None = None
) -> dict[str, Any]:
    """`meta.json`: the run's description, when it started, and how it ended once it has."""
    out = {
        **described,
        "start_utc": started_utc.isoformat(timespec="seconds"),
        "executable": sys.executable,
    }
    from ..runlog.process_start import process_start

    started = process_start(os.getpid())
    if started is not None:  # `tm runs` tells this tm from a later process given its pid
        out["tm_pid"] = os.getpid()
        out["tm_process_start"] = started
    if end:
        out.update(end)
    return out
