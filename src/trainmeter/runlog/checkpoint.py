"""A finished run opens at once: the replay's state kept beside the log, derived and disposable.

Replaying a long log (`tm summary`, `tm view`, `tm report`, `tm runs`, `tm compare`) costs a
minute at millions of steps. After a replay the state it reached (the engine, the decoder's
counts, the dashboard's bounded history) is saved as `events.jsonl.ckpt`, keyed to the number
of log bytes it covers and a hash of the log's first and last bytes before that point; the next
replay resumes from it and reads only what follows. The log stays the one source of truth:

- a checkpoint is never trusted. It is signed with an HMAC whose key lives in this user's
  private state directory (`$TRAINMETER_STATE_DIR`, else `$XDG_STATE_HOME/trainmeter`, else
  `~/.local/state/trainmeter`, mode 0700, the key 0600) and is unpickled only after the
  signature checks: a checkpoint written by anyone else, edited, or cut short is ignored;
- it is used only when the log still holds the same bytes where it was taken (its size at least
  the offset, the same head and tail hashes; at the same size, the same inode and modification
  time: the log is only ever appended to), by the same trainmeter code (a fingerprint of the
  package's files) and the same Python: a stale or foreign one is ignored and rebuilt;
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
import tempfile
from pathlib import Path
from typing import Any

from ..agent.inputs import read_bytes

MAGIC = b"trainmeter-checkpoint 1\n"
SUFFIX = ".ckpt"
#: Bytes of the log hashed at each end of the covered part.
HEAD_BYTES = 4096
#: A replay's state is bounded (each curve keeps a bounded history): a file past this is not
#: one of ours, and is not read (the log is replayed whole instead)
MAX_CHECKPOINT_BYTES = 1 << 30
TAIL_BYTES = 65536
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


def _log_hashes(events: Path, offset: int) -> tuple[str, str] | None:
    """(head, tail) sha256 of the log's first and last bytes before `offset`; None if shorter."""
    try:
        with open(events, "rb") as fh:
            if os.fstat(fh.fileno()).st_size < offset:
                return None
            head = fh.read(min(HEAD_BYTES, offset))
            start = max(0, offset - TAIL_BYTES)
            fh.seek(start)
            tail = fh.read(offset - start)
    except OSError:
        return None
    if len(tail) != offset - start:
        return None
    return hashlib.sha256(head).hexdigest(), hashlib.sha256(tail).hexdigest()


class _Pickler(pickle.Pickler):
    """The engine's immutable values (`Fact`, `ModelShape`: slots, assignment refused) are
    rebuilt through their constructors, from their `_fields()` in the constructor's order."""

    def reducer_override(self, obj: Any) -> Any:
        cls = type(obj)
        if "__slots__" in cls.__dict__ and "_fields" in cls.__dict__ and "__setattr__" in cls.__dict__:
            return cls, tuple(obj._fields())
        return NotImplemented


def save(events: Path, offset: int, observers: list[str], state: Any) -> bool:
    """Write the checkpoint of `state`, which covers the log's first `offset` bytes."""
    secret = key()
    hashes = _log_hashes(events, offset)
    if secret is None or hashes is None:
        return False
    try:
        buffer = io.BytesIO()
        _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(state)
        payload = buffer.getvalue()
    except Exception:  # noqa: BLE001 - something in the state will not pickle: no checkpoint
        return False
    try:
        st = os.stat(events)
    except OSError:
        return False
    header = json.dumps(
        {"offset": offset, "head": hashes[0], "tail": hashes[1], "code": fingerprint(),
         "observers": observers, "log": [st.st_ino, st.st_size, st.st_mtime_ns]},
        separators=(",", ":"),
    ).encode()
    body = len(header).to_bytes(8, "little") + header + payload
    mac = hmac.new(secret, body, hashlib.sha256).digest()
    target = path_for(events)
    try:
        fd, tmp = tempfile.mkstemp(prefix=target.name + ".", dir=target.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(MAGIC + mac + body)
            os.replace(tmp, target)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        return False
    return True


def load(events: Path) -> tuple[int, list[str], Any] | None:
    """(offset, observer names, state) of a checkpoint that can be trusted, else None."""
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
        if _log_hashes(events, offset) != (header["head"], header["tail"]):
            return None  # the log is not the one it was taken from (stale, or foreign)
        st = os.stat(events)
        if st.st_size == header["log"][1] and [st.st_ino, st.st_mtime_ns] != header["log"][::2]:
            return None  # the same length, but written again since: rewritten, not appended to
        state = pickle.loads(body[8 + size :])  # noqa: S301 - signed with our private key
    except Exception:  # noqa: BLE001 - any doubt: replay the whole log
        return None
    return offset, observers, state
