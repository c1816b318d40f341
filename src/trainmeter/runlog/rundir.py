"""A run directory written through one directory descriptor, never through a symlink.

`tm` often runs where others can write: a shared project directory, the system's temporary
directory, a cluster's scratch space; often as root. Whoever can rename entries in a directory on
the path to a run can swap the live run directory for a symlink between two of `tm`'s writes, and
have `meta.json`, `summary.json` and the passports written wherever the link points. So:

- the runs directory (`.trainmeter/runs`) and its parent `.trainmeter` are opened one component
  at a time and must belong to the user; one that belongs to another user is refused (the run
  goes on without a log, and says why). One of the user's own that others may write to (a umask
  of 002, `chmod 777`) is made the user's alone, with a note. A symlink is followed only when it
  is the user's and sits where nobody else can swap it (a `.trainmeter` linked to a larger disk,
  in the user's own project); a symlink planted where others write is refused;
- a run directory is made (0700) and opened once (`RunDir`); every file of the run is then
  created, replaced and appended relative to that descriptor, with `O_NOFOLLOW`: a symlink
  planted at a file's name is replaced, never written through;
- a file is written whole or not at all: to a fresh temporary name (`O_EXCL`), then renamed
  into place; a write that fails (a full disk) removes its temporary file;
- a little disk space is held back from the start (`reserve`), so on a disk that fills during
  the run `meta.json` can still say how the run ended.

Commands that write into a finished run (`tm report`, `tm passport`) open it with `RunDir.at`:
the same checks, the directory itself never through a symlink.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_WRITE_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
#: Bytes held back at the start of a run for what must be written when the disk is full.
RESERVE_B = 16 * 1024
_RESERVE_NAME = ".reserve"
#: The directories tm makes on the way to its runs: the only ones it tightens itself.
OWN_NAMES = frozenset({".trainmeter", "runs"})


class UnsafeDirectory(OSError):
    """A directory on the way to a run that another user controls. The message says which."""


def _owner_check(fd: int, shown: Path, notes: list[str]) -> None:
    """Raise `UnsafeDirectory` unless the directory open at `fd` is the user's; take write
    access from others on one that is (noted)."""
    st = os.fstat(fd)
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeDirectory(f"{shown} is not a directory")
    if st.st_uid != os.geteuid():
        raise UnsafeDirectory(
            f"{shown} belongs to uid {st.st_uid}, not to you (uid {os.geteuid()}): whoever owns "
            "it could redirect tm's files; remove it, or run where the directory is yours"
        )
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        if shown.name not in OWN_NAMES:  # not tm's to change
            raise UnsafeDirectory(f"{shown} is writable by others: tm does not write in it")
        os.fchmod(fd, stat.S_IMODE(st.st_mode) & ~(stat.S_IWGRP | stat.S_IWOTH))
        notes.append(f"{shown} was writable by others; it is now yours alone")


def _private_parent(parent_fd: int) -> bool:
    """Whether nobody but the user (and root) can rename entries in this directory: then a
    symlink of the user's there cannot be swapped for another, and may be followed."""
    st = os.fstat(parent_fd)
    if st.st_uid not in (0, os.geteuid()):
        return False
    return not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) or bool(st.st_mode & stat.S_ISVTX)


def _open_child(parent_fd: int, name: str, shown: Path, create: bool, notes: list[str]) -> int:
    """`name` inside the directory open at `parent_fd`: made (0700) when asked and missing,
    opened and checked. A symlink is followed only when it is the user's and sits where no one
    else can swap it (a private or sticky parent: a user's own `.trainmeter` link to a larger
    disk); any other is refused."""
    if create:
        try:
            os.mkdir(name, 0o700, dir_fd=parent_fd)
        except FileExistsError:
            pass
    flags = _DIR_FLAGS | _NOFOLLOW
    try:
        link = os.lstat(name, dir_fd=parent_fd)
    except FileNotFoundError:
        link = None
    if link is not None and stat.S_ISLNK(link.st_mode):
        if link.st_uid != os.geteuid() or not _private_parent(parent_fd):
            raise UnsafeDirectory(
                f"{shown} is a symlink of uid {link.st_uid} where others can write: "
                "tm does not write through it"
            )
        flags = _DIR_FLAGS  # the user's own link, which nobody else can swap
    fd = os.open(name, flags, dir_fd=parent_fd)
    try:
        _owner_check(fd, shown, notes)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_root(root: Path, create: bool = True, notes: list[str] | None = None) -> int:
    """A descriptor of the runs directory `root` (`.../.trainmeter/runs`): its last two
    components opened and checked one at a time (see the module's text), the rest by path."""
    notes = notes if notes is not None else []
    root = Path(os.path.abspath(root))
    base, parts = root.parent.parent, (root.parent.name, root.name)
    if create:
        base.mkdir(parents=True, exist_ok=True)
    fd = os.open(base, _DIR_FLAGS)
    shown = base
    try:
        for name in parts:
            shown = shown / name
            child = _open_child(fd, name, shown, create, notes)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


#: Run directories this process opened, by path: a writer handed only a path (a view at the
#: end of a run) writes through the descriptor the store opened.
_OPEN: dict[str, RunDir] = {}


class RunDir:
    """One run directory, open. Every file is written relative to `fd`, never via a symlink."""

    def __init__(self, fd: int, path: Path, notes: list[str] | None = None) -> None:
        self.fd = fd
        self.path = path
        self.notes = notes or []

    # ---- opening ----------------------------------------------------------------------------

    @classmethod
    def make(cls, root: Path, base: str) -> RunDir:
        """A fresh run directory `base` under `root` (`base-2`, `base-3`... when taken)."""
        notes: list[str] = []
        root_fd = open_root(root, create=True, notes=notes)
        try:
            for n in range(1, 1000):
                name = base if n == 1 else f"{base}-{n}"
                try:
                    os.mkdir(name, 0o700, dir_fd=root_fd)  # the owner's: argv, hosts, names
                except FileExistsError:
                    continue
                fd = os.open(name, _DIR_FLAGS | _NOFOLLOW, dir_fd=root_fd)
                run = cls(fd, Path(os.path.abspath(root)) / name, notes)
                _OPEN[str(run.path)] = run
                return run
        finally:
            os.close(root_fd)
        raise OSError(f"no free run directory name under {root}")

    @classmethod
    def at(cls, path: Path) -> RunDir:
        """An existing run directory: the one this process opened, or opened now (its parent
        by path; the directory itself never through a symlink, and only when it is yours)."""
        path = Path(os.path.abspath(path))
        known = _OPEN.get(str(path))
        if known is not None and known.fd >= 0:
            return known
        parent = os.open(path.parent, _DIR_FLAGS)
        try:
            fd = _open_child(parent, path.name, path, False, [])
        finally:
            os.close(parent)
        run = cls(fd, path)
        _OPEN[str(path)] = run
        return run

    def close(self) -> None:
        if self.fd >= 0:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = -1
        if _OPEN.get(str(self.path)) is self:
            del _OPEN[str(self.path)]

    # ---- files ------------------------------------------------------------------------------

    def write_bytes(self, name: str, data: bytes) -> None:
        """`name` holds `data` (mode 0600), whole or not at all; a symlink at `name` is
        replaced, not followed. Raises OSError (the temporary file removed) when it fails."""
        tmp = f".{name}.{os.urandom(4).hex()}.tmp"  # secrets.token_hex, less its imports (hmac)
        fd = os.open(tmp, _WRITE_NEW, 0o600, dir_fd=self.fd)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=self.fd)
            except OSError:
                pass
            raise

    def write_text(self, name: str, text: str) -> None:
        """`write_bytes` of UTF-8 (a name that was not UTF-8 is written as its escape)."""
        self.write_bytes(name, text.encode("utf-8", "backslashreplace"))

    def append(self, name: str, buffering: int = -1):  # noqa: ANN201 - a binary file object
        """`name` opened to append (created 0600), never through a symlink."""
        fd = os.open(
            name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
            0o600, dir_fd=self.fd,
        )
        return os.fdopen(fd, "ab", buffering=buffering)

    def read_bytes(self, name: str, limit: int | None = None) -> bytes:
        """At most `limit` bytes of `name`, never through a symlink."""
        fd = os.open(name, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0), dir_fd=self.fd)
        with os.fdopen(fd, "rb") as fh:
            return fh.read() if limit is None else fh.read(limit)

    # ---- the disk's reserve -----------------------------------------------------------------

    def reserve(self, size: int = RESERVE_B) -> bool:
        """Hold `size` bytes of the disk (a hidden file), for `release` to give back when the
        disk is full and the run's end must still be written. False when it could not."""
        try:
            fd = os.open(_RESERVE_NAME, _WRITE_NEW, 0o600, dir_fd=self.fd)
        except OSError:
            return False
        try:
            if hasattr(os, "posix_fallocate"):
                os.posix_fallocate(fd, 0, size)
            else:  # pragma: no cover - macOS: blocks of zeros
                os.write(fd, b"\0" * size)
        except OSError:
            os.close(fd)
            self.release()
            return False
        os.close(fd)
        return True

    def release(self) -> None:
        try:
            os.unlink(_RESERVE_NAME, dir_fd=self.fd)
        except OSError:
            pass


def write_file(run_dir: Path, name: str, text: str) -> None:
    """`text` into `run_dir`/`name` (see `RunDir.write_bytes`); OSError when it cannot."""
    RunDir.at(run_dir).write_text(name, text)
