"""Descriptors `tm` holds back from the start of a run for its end.

A run that used up the process's descriptor limit (idle dashboard clients, the user's own files
in a run under `tm attach`) must still be able to map the rings and write the summary at the
end: a few descriptors are opened on /dev/null (never inherited) as the run starts and given
back just before the end needs them.
"""

from __future__ import annotations

import os

#: Descriptors held back from the start for the end of the run (rings, summary, meta).
RESERVED_FDS = 16


class Reserve:
    """A handful of descriptors held from `hold()` until `release()`."""

    def __init__(self) -> None:
        self._fds: list[int] = []

    def hold(self, count: int = RESERVED_FDS) -> None:
        """Open up to `count`; those opened before a refusal (the limit reached) are held too,
        so `release` gives them back."""
        for _ in range(count):
            try:
                self._fds.append(os.open(os.devnull, os.O_RDONLY))
            except OSError:
                return

    def release(self) -> None:
        for fd in self._fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds = []
