"""When a process started: with its pid, what tells one process from a later one given the pid.

Its own module because `tm` writes it into `meta.json` as every run starts, and `runlog.runs`
(where `tm runs` reads it back) pulls in dataclasses and inspect: milliseconds of start-up.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs milliseconds on every run's start-up
if TYPE_CHECKING:
    from typing import Any


def process_start(pid: Any) -> int | None:
    """When process `pid` started, in clock ticks since boot (Linux `/proc/<pid>/stat`), or
    None: with the pid, what tells one process from a later one given the same pid."""
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as fh:
            return int(fh.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError, TypeError):
        return None
