"""Where the node readers get their files: the live system, a recorder, or a dump.

The cgroup and inventory readers never open a path themselves; they ask a `Files`. That is what
lets `tm hardware --dump` pack exactly the files they read on a user's node into one JSON file,
and the same readers replay it on any machine as a test fixture.
"""

from __future__ import annotations

import os
from typing import Any

from ..agent.inputs import read_text

#: /proc/cpuinfo of a few hundred cores is about a megabyte; no file read here is near this
MAX_BYTES = 16 << 20


class Files:
    """The live file system."""

    def read(self, path: str) -> str | None:
        """The text of a file, or None when it does not exist, cannot be read, or is larger
        than any /proc or /sys file these readers ask for (`MAX_BYTES`)."""
        try:
            return read_text(path, MAX_BYTES, "system file")
        except (OSError, ValueError):
            return None

    def listdir(self, path: str) -> list[str] | None:
        try:
            return sorted(os.listdir(path))
        except OSError:
            return None

    def disk_usage(self, path: str) -> dict[str, int] | None:
        try:
            st = os.statvfs(path)
        except OSError:
            return None
        return {"total_b": st.f_blocks * st.f_frsize, "free_b": st.f_bavail * st.f_frsize}


class RecordingFiles(Files):
    """The live file system, writing down every answer for a dump."""

    def __init__(self, inner: Files | None = None) -> None:
        self.inner = inner or Files()
        self.record: dict[str, Any] = {"files": {}, "dirs": {}, "disk_usage": {}}

    def read(self, path: str) -> str | None:
        text = self.inner.read(path)
        self.record["files"][path] = text
        return text

    def listdir(self, path: str) -> list[str] | None:
        names = self.inner.listdir(path)
        self.record["dirs"][path] = names
        return names

    def disk_usage(self, path: str) -> dict[str, int] | None:
        usage = self.inner.disk_usage(path)
        self.record["disk_usage"][path] = usage
        return usage


class DumpFiles(Files):
    """Answers from a dump's `node` part; what the dump did not record does not exist."""

    def __init__(self, record: dict[str, Any]) -> None:
        self.record = record

    def read(self, path: str) -> str | None:
        return self.record.get("files", {}).get(path)

    def listdir(self, path: str) -> list[str] | None:
        return self.record.get("dirs", {}).get(path)

    def disk_usage(self, path: str) -> dict[str, int] | None:
        return self.record.get("disk_usage", {}).get(path)
