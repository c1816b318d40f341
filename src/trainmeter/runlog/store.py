"""The run directory: `.trainmeter/runs/<UTC YYYYmmdd-HHMMSS>-<name>/`.

`events.jsonl` is the append-only source of truth: one record a line, written in the order the
engine is fed, flushed at least once a second and at the end so a crash leaves a usable log.
`meta.json` says what was run; `summary.json` holds the final snapshot. A disk or permission
failure warns once and turns the store off: the training still runs to the end and `tm` still
returns the child's status (promise 9). Every file is written through the run directory's
descriptor, never through a symlink, and a runs directory another user owns is refused
(`rundir.py`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .rundir import RunDir, UnsafeDirectory

if TYPE_CHECKING:
    from datetime import datetime

RUNS = Path(".trainmeter") / "runs"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(name: str) -> str:
    """A name that is one path component on every filesystem: no slashes, spaces, dots first."""
    cleaned = _UNSAFE.sub("-", name).strip("-.")[:64]
    return cleaned or "run"


def runs_root(cwd: Path | None = None) -> Path:
    return (cwd or Path.cwd()) / RUNS


def what_blocks(root: Path) -> str | None:
    """Why `root` cannot be a directory, said plainly: a file, or a symlink to nothing, where
    a directory should be (mkdir's own words are only "File exists")."""
    for path in (root, *root.parents):
        if path.is_symlink() and not path.exists():
            return f"{path} is a symlink to {os.readlink(path)}, which does not exist"
        if path.exists() and not path.is_dir():
            return f"{path} is a file, not a directory"
        if path.is_dir():
            return None
    return None


class RunStore:
    """Writes one run's directory. Every method is a no-op once the store has failed."""

    def __init__(self, warn: Callable[[str, str], None]) -> None:
        self.warn = warn
        self.path: Path | None = None
        self.dir: RunDir | None = None
        self.broken: str | None = None
        self._events = None
        self._reserved = False

    @classmethod
    def create(
        cls,
        name: str,
        warn: Callable[[str, str], None],
        root: Path | None = None,
        when: datetime | None = None,
    ) -> RunStore:
        """Make a fresh run directory; a name taken in the same second gets -2, -3, ..."""
        from datetime import datetime, timezone  # late: a replay makes no run directory

        store = cls(warn)
        stamp = (when or datetime.now(timezone.utc)).strftime("%Y%m%d-%H%M%S")
        base = f"{stamp}-{safe_name(name)}"
        root = root if root is not None else runs_root()
        try:
            store.dir = RunDir.make(root, base)
            store.path = store.dir.path
            for note in store.dir.notes:
                warn(f"store:{note}", note)
            store._reserved = store.dir.reserve()
            store._events = store.dir.append("events.jsonl", buffering=1 << 16)
        except UnsafeDirectory as exc:
            store._fail(exc)
        except OSError as exc:
            in_the_way = (FileExistsError, NotADirectoryError, FileNotFoundError)
            blocked = what_blocks(root) if isinstance(exc, in_the_way) else None
            store._fail(blocked or exc)
        return store

    def _fail(self, exc: BaseException | str) -> None:
        self.broken = str(exc)
        self.warn(
            "store",
            f"cannot write the run log ({exc}); the run goes on without it",
        )
        events, self._events = self._events, None
        if events is not None:
            try:
                events.close()
            except OSError:
                pass

    def append(self, line: bytes) -> None:
        """One encoded record, without its newline."""
        if self._events is None:
            return
        try:
            self._events.write(line + b"\n")
        except (OSError, ValueError) as exc:
            self._fail(exc)

    def flush(self) -> None:
        if self._events is None:
            return
        try:
            self._events.flush()
        except (OSError, ValueError) as exc:
            self._fail(exc)

    def close_events(self) -> None:
        if self._events is None:
            return
        try:
            self._events.close()
        except OSError as exc:
            self._fail(exc)
        self._events = None

    def write_json(self, filename: str, obj: Any, last: bool = False) -> None:
        """Write a JSON file atomically (temp file, then rename), NaN refused. `last`: the
        run's last word (`meta.json` with its end), written with the disk space held back."""
        if self.dir is None:
            return
        if last and self._reserved:
            self.dir.release()  # a full disk still takes the run's end
            self._reserved = False
        if self.broken is not None and not last:
            return
        try:
            text = json.dumps(obj, allow_nan=False, indent=2, sort_keys=False)
            self.dir.write_text(filename, text + "\n")
        except (OSError, TypeError, ValueError) as exc:
            # a disk that already cost the log is said once, not again for each file
            self.warn("store" if self.broken else f"json:{filename}", f"cannot write {filename} ({exc})")
