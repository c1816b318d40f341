"""The run directory: `.trainmeter/runs/<UTC YYYYmmdd-HHMMSS>-<name>/`.

`events.jsonl` is the append-only source of truth: one record a line, written in the order the
engine is fed, flushed at least once a second and at the end so a crash leaves a usable log.
`meta.json` says what was run; `summary.json` holds the final snapshot. A disk or permission
failure warns once and turns the store off: the training still runs to the end and `tm` still
returns the child's status (promise 9).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

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


def private_opener(path: str, flags: int) -> int:
    """`open(..., opener=private_opener)`: a new file is the owner's alone (0600)."""
    return os.open(path, flags, 0o600)


class RunStore:
    """Writes one run's directory. Every method is a no-op once the store has failed."""

    def __init__(self, warn: Callable[[str, str], None]) -> None:
        self.warn = warn
        self.path: Path | None = None
        self.broken: str | None = None
        self._events = None

    @classmethod
    def create(
        cls,
        name: str,
        warn: Callable[[str, str], None],
        root: Path | None = None,
        when: datetime | None = None,
    ) -> RunStore:
        """Make a fresh run directory; a name taken in the same second gets -2, -3, ..."""
        store = cls(warn)
        stamp = (when or datetime.now(timezone.utc)).strftime("%Y%m%d-%H%M%S")
        base = f"{stamp}-{safe_name(name)}"
        root = root if root is not None else runs_root()
        try:
            root.mkdir(parents=True, exist_ok=True)
            for n in range(1, 1000):
                candidate = root / (base if n == 1 else f"{base}-{n}")
                try:
                    candidate.mkdir(mode=0o700)  # the owner's: argv, hostnames, metric names
                except FileExistsError:
                    continue
                store.path = candidate
                break
            if store.path is None:
                raise OSError(f"no free run directory name under {root}")
            store._events = open(  # noqa: SIM115
                store.path / "events.jsonl", "ab", buffering=1 << 16, opener=private_opener
            )
        except OSError as exc:
            blocked = what_blocks(root) if isinstance(exc, (FileExistsError, NotADirectoryError)) else None
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

    def write_json(self, filename: str, obj: Any) -> None:
        """Write a JSON file atomically (temp file, then rename), NaN refused."""
        if self.path is None or self.broken is not None:
            return
        target = self.path / filename
        tmp = target.with_name(f".{filename}.tmp")
        try:
            text = json.dumps(obj, allow_nan=False, indent=2, sort_keys=False)
            with open(tmp, "w", encoding="utf-8", opener=private_opener) as fh:
                fh.write(text + "\n")
            os.replace(tmp, target)
        except (OSError, TypeError, ValueError) as exc:
            self.warn(f"json:{filename}", f"cannot write {filename} ({exc})")
