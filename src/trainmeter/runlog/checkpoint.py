"""A finished run opens at once: the replay's state kept beside the log, derived and disposable.

Replaying a long log (`tm summary`, `tm view`, `tm report`, `tm runs`, `tm compare`) costs a
minute at millions of steps. After a replay the state it reached (the engine, the decoder's
counts, the dashboard's bounded history) is saved as `events.jsonl.ckpt`, keyed to the number
of log bytes it covers and the SHA-256 of exactly those bytes; the next replay resumes from it
and reads only what follows. `tm` also saves its live engine while the run goes (every
`CHECKPOINT_EVERY_B` bytes of log or `CHECKPOINT_EVERY_S` seconds, `runlog/live_checkpoint.py`),
so a `tm` killed outright leaves one at most that far behind. The log stays the one source of
truth:

- a checkpoint is never trusted. It is signed with an HMAC whose key lives in this user's
  private state directory (`$TRAINMETER_STATE_DIR`, else `$XDG_STATE_HOME/trainmeter`, else
  `~/.local/state/trainmeter`, mode 0700, the key 0600) and is unpickled only after the
  signature checks: a checkpoint written by anyone else, edited, or cut short is ignored;
- it is used only for bytes it provably covers: the log's first `offset` bytes must hash to the
  checkpoint's SHA-256 (read and hashed in full, about a gigabyte a second), by the same
  trainmeter code (a fingerprint of the package's files) and the same Python; a stale or
  foreign one is ignored and rebuilt. Hashing is skipped only when the log has not been written
  since the checkpoint was saved: the same inode, size, modification time and change time
  (`st_ctime`, which no user can set back: writing or `touch` moves it). What this cannot see:
  a rewrite within the same timestamp tick as the save (file systems keep nanoseconds, some
  update them at a coarser grain), a rewrite by someone who sets the system clock back (root),
  a file system that keeps no change time, and a SHA-256 collision;
- every failure (no key, an unwritable directory, a full disk) costs the speed-up, never the
  answer: the replay then reads the whole log, as it did before.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import os
import pickle
import stat
import sys
from pathlib import Path
from typing import Any

from ..agent.inputs import read_bytes

MAGIC = b"trainmeter-checkpoint 2\n"
SUFFIX = ".ckpt"
#: Bytes read at a time when a covered prefix is hashed.
HASH_BLOCK = 1 << 20
#: A replay's state is bounded (each curve keeps a bounded history): a file past this is not
#: one of ours, and is not read (the log is replayed whole instead)
MAX_CHECKPOINT_BYTES = 1 << 30
_MAC = 32
_KEY_NAME = "checkpoint.key"

_fingerprint: str | None = None


def path_for(events: Path) -> Path:
    return events.with_name(events.name + SUFFIX)


def state_dir() -> Path:
    env = os.environ
    if env.get("TRAINMETER_STATE_DIR"):
        return Path(env["TRAINMETER_STATE_DIR"])
    base = env.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "trainmeter"


def _private(st: os.stat_result) -> bool:
    return st.st_uid == os.getuid() and not st.st_mode & (stat.S_IRWXG | stat.S_IRWXO)


def key() -> bytes | None:
    """This user's signing key, made on first use; None where none can be kept privately."""
    folder = state_dir()
    path = folder / _KEY_NAME
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "wb") as fh:
                fh.write(os.urandom(32))
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as fh:
            if not _private(os.fstat(fh.fileno())):
                return None  # readable by others: a signature anyone could forge
            value = fh.read(64)  # 32 bytes; anything longer is not our key
    except OSError:
        return None
    return value if len(value) == 32 else None


def fingerprint() -> str:
    """The code that made a checkpoint: trainmeter's files (name, size, mtime) and Python."""
    global _fingerprint
    if _fingerprint is None:
        root = Path(__file__).resolve().parents[1]
        h = hashlib.sha256(sys.version.encode())
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for name in sorted(filenames):
                if name.endswith(".py"):
                    full = os.path.join(dirpath, name)
                    try:
                        st = os.stat(full)
                    except OSError:
                        continue
                    h.update(f"{os.path.relpath(full, root)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
        _fingerprint = h.hexdigest()
    return _fingerprint


def prefix_hash(events: Path, offset: int) -> Any:
    """A SHA-256 object fed the log's first `offset` bytes; None if the log is shorter."""
    h = hashlib.sha256()
    try:
        with open(events, "rb", buffering=0) as fh:
            left = offset
            while left > 0:
                block = fh.read(min(HASH_BLOCK, left))
                if not block:
                    return None
                h.update(block)
                left -= len(block)
    except OSError:
        return None
    return h


def stat_key(st: os.stat_result) -> list[int]:
    """What says a file was not written since: inode, size, modification and change times."""
    return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


class _Pickler(pickle.Pickler):
    """The engine's immutable values (`Fact`, `ModelShape`: slots, assignment refused) are
    rebuilt through their constructors, from their `_fields()` in the constructor's order."""

    def reducer_override(self, obj: Any) -> Any:
        cls = type(obj)
        if "__slots__" in cls.__dict__ and "_fields" in cls.__dict__ and "__setattr__" in cls.__dict__:
            return cls, tuple(obj._fields())
        return NotImplemented


def dumps(state: Any) -> bytes | None:
    """The state as bytes (None when something in it will not pickle)."""
    try:
        buffer = io.BytesIO()
        _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(state)
    except Exception:  # noqa: BLE001 - something in the state will not pickle: no checkpoint
        return None
    return buffer.getvalue()


def save(
    events: Path,
    offset: int,
    observers: list[str],
    state: Any,
    digest: str,
    unchanged: list[int] | None = None,
) -> bool:
    """Write the checkpoint of `state` (an object, or `dumps`' bytes), which covers the log's
    first `offset` bytes, whose SHA-256 is `digest` (hex), hashed by the caller from the very
    bytes it fed. `unchanged`: the log's `stat_key` when it was not written while they were
    read (then a later look at the same file skips hashing); None: always hash."""
    secret = key()
    payload = state if isinstance(state, bytes) else dumps(state)
    if secret is None or payload is None:
        return False
    header = json.dumps(
        {"offset": offset, "sha256": digest, "code": fingerprint(), "observers": observers,
         "log": unchanged},
        separators=(",", ":"),
    ).encode()
    body = len(header).to_bytes(8, "little") + header + payload
    mac = hmac.new(secret, body, hashlib.sha256).digest()
    target = path_for(events)
    try:  # through the run directory's descriptor: never through a planted symlink
        from .rundir import RunDir

        RunDir.at(target.parent).write_bytes(target.name, MAGIC + mac + body)
    except OSError:
        return False
    return True


def load(events: Path) -> tuple[int, list[str], Any, Any] | None:
    """(offset, observer names, state, hasher) of a checkpoint that can be trusted, else None.

    `hasher` is a SHA-256 object fed the covered bytes (continue it over what follows to save
    the next checkpoint), or None when the log was not written since the save (not hashed)."""
    secret = key()
    if secret is None:
        return None
    try:
        data = read_bytes(path_for(events), MAX_CHECKPOINT_BYTES, "checkpoint")
    except (OSError, ValueError):
        return None
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + _MAC + 8:
        return None
    mac, body = data[len(MAGIC) : len(MAGIC) + _MAC], data[len(MAGIC) + _MAC :]
    if not hmac.compare_digest(mac, hmac.new(secret, body, hashlib.sha256).digest()):
        return None  # not ours, or changed since: never unpickled
    try:
        size = int.from_bytes(body[:8], "little")
        header = json.loads(body[8 : 8 + size])
        offset, observers = int(header["offset"]), list(header["observers"])
        if header["code"] != fingerprint():
            return None
        st = os.stat(events)
        hasher = None
        if st.st_size < offset:
            return None  # cut short since
        if header["log"] is None or stat_key(st) != header["log"]:
            hasher = prefix_hash(events, offset)  # written since the save: prove the bytes
            if hasher is None or not hmac.compare_digest(hasher.hexdigest(), header["sha256"]):
                return None  # not the bytes it was taken from (rewritten, or another log)
        state = pickle.loads(body[8 + size :])  # noqa: S301 - signed with our private key
    except Exception:  # noqa: BLE001 - any doubt: replay the whole log
        return None
    return offset, observers, state, hasher
