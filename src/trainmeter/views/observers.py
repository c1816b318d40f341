"""Which live views watch a run: the one place each view registers itself.

`tm` calls `make_observers` once, before the child starts, and feeds what it returns through
`supervisor.observers.ObserverSet` (records, a snapshot a second, the final snapshot). Each view
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
    if getattr(opts, "web", False):
        from .web.live import make as make_web

        web = make_web(opts, run_dir, warn, stderr)
        if web is not None:
            observers.append(web)
    return observers
