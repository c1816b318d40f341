"""The ingest socket: where the agents' datagrams arrive.

An AF_UNIX datagram socket in a private directory (`private_dir` makes it 0700, so no other
user can send into the run: promise 8). The receive buffer is raised as far as the kernel lets
us so a burst is queued, not dropped. One thread receives each datagram into one reusable
buffer and hands it to the shared `decode.Decoder`, which yields good records for the sink and
counts every line it skips with its reason; the count reaches the log as the fact
`ingest_dropped`. The loop does nothing else, so it keeps up with a high datagram rate, and
nothing a datagram holds can stop it: whatever goes wrong with one datagram is counted and the
loop goes on. Stopping never blocks: the wake-up datagram is sent without waiting, and the
final drain of the queue is bounded in time, even under a flood.

The directory's name carries `tm`'s pid (`trainmeter-<pid>-...`). A `tm` killed with SIGKILL
cannot remove it; the next `tm` does (`clean_stale_dirs`), once that pid is gone.
"""

from __future__ import annotations

# the C module under `socket`: socket.py's own import (enum classes, array) was on the way to
# the child's start; the socket objects and constants used here are the C module's alike
import _socket as socket
import contextlib
import os
import struct
import sys
import threading
import time
from collections.abc import Callable

from ..runlog.decode import Decoder

TYPE_CHECKING = False  # typing costs milliseconds before the child starts
if TYPE_CHECKING:
    from typing import Any

RCVBUF_BYTES = 8 << 20
#: The receive buffer a datagram is read into at first: far above what the agent sends
#: (`records.MAX_DATAGRAM`). A bigger datagram is cut, its lost lines counted, and the buffer
#: grows (up to `_RECV_MAX`) for the next one.
_RECV_SIZE = 1 << 20
_RECV_MAX = 64 << 20
_POLL_S = 0.1
_DRAIN_MAX_S = 0.5  # stop() takes what is queued for at most this long (a flood never ends)
_DIR_PREFIX = "trainmeter-"
_CHECK_S = 0.25  # how often the ingest thread looks for new ring files and for its socket
_SOCK_NAME = "ingest.sock"
_MSG_TRUNC = getattr(socket, "MSG_TRUNC", 0)

Sink = Callable[[bytes, dict], None]  # (the line, the record it decoded to)


def _raise_rcvbuf(sock: socket.socket, size: int) -> int:
    """SO_RCVBUFFORCE passes the rmem_max cap when we may (root, CAP_NET_ADMIN), else RCVBUF."""
    for option in (getattr(socket, "SO_RCVBUFFORCE", None), socket.SO_RCVBUF):
        if option is None:
            continue
        try:
            sock.setsockopt(socket.SOL_SOCKET, option, size)
            break
        except OSError:
            continue
    return sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)


def _rmtree(path: str) -> None:
    """Remove the socket directory, whatever is left in it; never raises. It holds files only
    (the socket, rings, faulthandler's stacks): unlinked one by one, without shutil's import
    (~2 ms) at the end of every run; anything else (a folder put there) goes through shutil."""
    try:
        for name in os.listdir(path):
            os.unlink(os.path.join(path, name))
        os.rmdir(path)
    except OSError:
        import shutil

        shutil.rmtree(path, ignore_errors=True)


_temp_dir: str | None = None


def temp_dir() -> str:
    """`tempfile.gettempdir()`, without importing tempfile before the child starts (it pulls
    in shutil, random and weakref: ~4 ms of every run's start-up). The same choice: the first
    of $TMPDIR, $TEMP, $TMP, /tmp, /var/tmp, /usr/tmp and the working directory where a file
    can be made and written; remembered for the process, as tempfile does."""
    global _temp_dir
    if _temp_dir is not None:
        return _temp_dir
    names = [os.environ.get(name) for name in ("TMPDIR", "TEMP", "TMP")]
    candidates = [d for d in names if d] + ["/tmp", "/var/tmp", "/usr/tmp"]
    with contextlib.suppress(OSError):
        candidates.append(os.getcwd())
    for folder in candidates:
        folder = os.path.abspath(folder) if folder != os.curdir else folder
        probe = os.path.join(folder, f".tm-probe-{os.urandom(6).hex()}")
        try:
            fd = os.open(probe, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError:
            continue
        try:
            try:
                os.write(fd, b"blat")
            finally:
                os.close(fd)
        except OSError:
            continue
        finally:
            with contextlib.suppress(OSError):
                os.unlink(probe)
        _temp_dir = folder
        return folder
    raise FileNotFoundError("no usable temporary directory ($TMPDIR, /tmp, /var/tmp, /usr/tmp)")


def private_dir(prefix: str, parent: str) -> str:
    """A new directory `parent/prefix` + 8 random characters, mode 0700 (`tempfile.mkdtemp`)."""
    for _ in range(100):
        path = os.path.join(parent, prefix + os.urandom(4).hex())
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        return os.path.abspath(path)
    raise FileExistsError(f"no free name for a directory {prefix}... in {parent}")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: a liveness check, nothing is delivered
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, not ours to signal
    return True


def _socket_unread(path: str) -> bool:
    """Whether nobody receives on the socket at `path` (an empty datagram is refused).

    The pid in a directory's name is not enough: a `tm` in another pid namespace (a container
    sharing /tmp) looks gone from here. An empty datagram is what `tm` itself uses to wake its
    thread, so a live `tm` ignores it.
    """
    try:
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            probe.setblocking(False)
            probe.sendto(b"", path)
        finally:
            probe.close()
    except (ConnectionRefusedError, FileNotFoundError):
        return True
    except OSError:
        return False  # a full queue (someone is there) or anything unclear: leave it
    return False


def clean_stale_dirs(tmp: str | None = None) -> list[str]:
    """Remove socket directories whose `tm` is gone (SIGKILLed); return what was removed.

    Only directories of this user, named `trainmeter-<pid>-...` and holding our socket, are
    looked at; one is removed only when its pid is gone and nobody receives on its socket.
    """
    tmp = tmp or temp_dir()
    removed: list[str] = []
    try:
        names = os.listdir(tmp)
    except OSError:
        return removed
    uid = os.getuid()
    for name in names:
        if not name.startswith(_DIR_PREFIX):
            continue
        pid_text = name[len(_DIR_PREFIX) :].split("-", 1)[0]
        if not pid_text.isdigit():
            continue
        path = os.path.join(tmp, name)
        try:
            st = os.lstat(path)
            if st.st_uid != uid or not os.path.isdir(path) or os.path.islink(path):
                continue
            if not os.path.lexists(os.path.join(path, _SOCK_NAME)):
                continue
        except OSError:
            continue
        try:
            if _pid_alive(int(pid_text)) or not _socket_unread(os.path.join(path, _SOCK_NAME)):
                continue
        except (OverflowError, ValueError):  # a pid no process can have: not one of ours
            continue
        _rmtree(path)
        if not os.path.exists(path):
            removed.append(path)
    return removed


#: The longest path a Unix socket can bind (sun_path less its NUL: 107 on Linux, 103 on macOS).
SOCKET_PATH_MAX = 103 if sys.platform == "darwin" else 107
_MKDTEMP_SUFFIX = 8  # the random part tempfile adds


def socket_parent(tmp: str | None = None) -> str:
    """Where the socket directory goes: `$TMPDIR`, unless a socket there would have a path
    longer than a Unix socket allows; then the first of /tmp, /var/tmp, /dev/shm where it fits
    (the directory is private either way). OSError, saying why, when none does."""
    tmp = tmp or temp_dir()
    name = f"{_DIR_PREFIX}{os.getpid()}-" + "x" * _MKDTEMP_SUFFIX
    for parent in (tmp, "/tmp", "/var/tmp", "/dev/shm"):
        if len(os.fsencode(os.path.join(parent, name, _SOCK_NAME))) > SOCKET_PATH_MAX:
            continue
        if parent == tmp or (os.path.isdir(parent) and os.access(parent, os.W_OK | os.X_OK)):
            return parent
    length = len(os.fsencode(os.path.join(tmp, name, _SOCK_NAME)))
    raise OSError(
        f"TMPDIR is too long for a Unix socket: the socket's path would be {length} bytes, "
        f"and a socket path can be at most {SOCKET_PATH_MAX}"
    )


class Ingest:
    """Owns the socket, its directory and the receiving thread."""

    def __init__(
        self, sink: Sink, rcvbuf: int = RCVBUF_BYTES, recv_size: int = _RECV_SIZE
    ) -> None:
        self.sink = sink
        try:
            clean_stale_dirs()
        except Exception:  # noqa: BLE001 - tidying up after others never stops this run
            pass
        self.dir = private_dir(f"{_DIR_PREFIX}{os.getpid()}-", socket_parent())
        self.path = os.path.join(self.dir, _SOCK_NAME)
        self.decoder = Decoder(from_socket=True)
        self.values = None  # a `values.ValueLines`, made at the first values datagram
        self.received = 0  # good records
        self.datagrams = 0
        self.last_rx = time.monotonic()
        self._buf = bytearray(recv_size)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: ring files mapped while the run goes (so a /tmp cleaner that removes the directory
        #: cannot take them), by (device, inode); and how often the socket had to be bound again
        self.rings: dict[tuple[int, int], Any] = {}  # None: read already (a program's before exec)
        self._rings_lock = threading.Lock()  # the ingest thread maps and reads them; so does stop
        self.rebound = 0
        self.rings_unread = 0  # ring files that could not be mapped at the end (counted)
        self.rebind_failed: str | None = None
        self._next_check = 0.0
        try:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            self.rcvbuf = _raise_rcvbuf(self.sock, rcvbuf)
            self.sock.bind(self.path)
            self.sock.settimeout(_POLL_S)
        except OSError:
            _rmtree(self.dir)
            raise

    @property
    def dropped(self) -> int:
        """Lines that were not records (or were cut off), all reasons together."""
        return self.decoder.skipped

    @property
    def drop_reasons(self) -> dict[str, int]:
        """A copy of the reasons, safe to take while the ingest thread adds to them."""
        for _ in range(10):
            try:
                return dict(self.decoder.reasons)
            except RuntimeError:  # changed size during the copy: the thread added a reason
                continue
        return {}

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="trainmeter-ingest", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            if time.monotonic() >= self._next_check:
                self._next_check = time.monotonic() + _CHECK_S
                self.check_directory()
            try:
                data = self._receive()
            except TimeoutError:
                continue
            except OSError:
                if self._stop.is_set():
                    return
                time.sleep(0.001)  # a closed or failing socket must not spin
                continue
            except Exception:  # noqa: BLE001 - nothing may end this loop but stop()
                self.decoder.skip("internal error")
                continue
            self.handle(data)

    def _receive(self) -> bytes:
        """One datagram. A datagram longer than the buffer is cut by the kernel: MSG_TRUNC
        gives its real length, and the lines lost in the cut-off part are counted."""
        buf = self._buf
        n = self.sock.recv_into(buf, len(buf), _MSG_TRUNC)
        if n <= len(buf):
            return bytes(memoryview(buf)[:n])
        data = bytes(buf)
        cut = data.rfind(b"\n") + 1  # the lines before the cut are whole
        whole, partial = data[:cut], data[cut:]
        lines = max(whole.count(b"\n"), 1)
        per_line = max(cut / lines, 1.0) if cut else float(len(buf))
        lost_bytes = n - cut
        self.decoder.skip("datagram cut", max(round(lost_bytes / per_line), 1 if partial else 0))
        if len(buf) < _RECV_MAX:
            self._buf = bytearray(min(max(n, 2 * len(buf)), _RECV_MAX))
        return whole

    def check_directory(self) -> None:
        """Map the ring files that appeared, and bind the socket again if its path is gone
        (a /tmp cleaner removed the socket or the whole directory mid-run). Never raises."""
        try:
            from .ring import keep_spares, map_new_rings

            with self._rings_lock:
                map_new_rings(self.dir, self.rings)
            keep_spares(self.dir)
            if not os.path.exists(self.path):
                self._rebind()
        except Exception:  # noqa: BLE001 - the ingest goes on with what it has
            pass

    def _rebind(self) -> None:
        try:
            os.makedirs(self.dir, mode=0o700, exist_ok=True)
            st = os.lstat(self.dir)
            if st.st_uid != os.getuid() or not os.path.isdir(self.dir) or st.st_mode & 0o077:
                raise OSError(f"{self.dir} is no longer this user's private directory")
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            try:
                _raise_rcvbuf(sock, self.rcvbuf)
                sock.bind(self.path)
                sock.settimeout(_POLL_S)
            except OSError:
                sock.close()
                raise
        except OSError as exc:
            self.rebind_failed = str(exc)
            return
        old, self.sock = self.sock, sock
        self.rebound += 1
        with contextlib.suppress(OSError):  # what the old socket still holds
            old.setblocking(False)
            while True:
                self.handle(old.recv(_RECV_MAX))
        with contextlib.suppress(OSError):
            old.close()

    def ring_maps(self) -> list[Any]:
        """Every ring file of the run, mapped: those mapped while it went, and any new ones."""
        from .ring import map_new_rings

        with self._rings_lock:
            self.rings_unread = map_new_rings(self.dir, self.rings)
            maps = [mm for mm in self.rings.values() if mm is not None]
            self.rings = {key: None for key in self.rings}  # all read from here on
        return maps

    def recover_images(self, pid: int, delivered: Any, accept: Sink) -> None:
        """`pid` began another program: log what its earlier rings hold that was not delivered
        (`ring.recover_set_aside`), on the ingest thread, before the new program's records."""
        from .ring import recover_set_aside

        with self._rings_lock:
            recover_set_aside(self.dir, self.rings, pid, delivered, accept)

    def handle(self, data: bytes) -> None:
        """Split one datagram into records for the sink; count what does not decode."""
        if not data:
            return  # the wake-up datagram, or an empty one: nothing to count
        self.datagrams += 1
        self.last_rx = time.monotonic()
        try:
            if data[:1] == b"\x00":  # the values of a ring, as the ring holds them
                from .values import ValueLines, slots_in

                if self.values is None:
                    self.values = ValueLines()
                try:
                    pairs = self.decoder.many(self.values.lines(data))
                except (ValueError, struct.error):
                    self.decoder.skip("values datagram unreadable", slots_in(data))
                    return
            else:
                pairs = self.decoder.datagram(data)
            for line, record in pairs:
                self.received += 1
                try:
                    self.sink(line, record)
                except Exception:  # noqa: BLE001 - the sink never raises; if it did, keep receiving
                    pass
        except Exception:  # noqa: BLE001 - the decoder never raises; if it did, count and go on
            self.decoder.skip("internal error")

    def settle(
        self,
        quiet_s: float = 0.05,
        max_s: float = 0.3,
        agents_alive: Callable[[], bool] | None = None,
    ) -> None:
        """After the child exits: wait until the socket is quiet for `quiet_s`, at most `max_s`.

        An agent flushes at exit, so once every process that said hello is gone its last
        datagrams are already queued (`stop()` takes those) and there is nothing to wait for:
        `agents_alive` says so, and then this returns at once, which keeps `tm`'s fixed cost
        low. The wait is for processes of the run still flushing, such as a worker that
        outlives its parent by a moment.
        """
        if agents_alive is not None and not agents_alive():
            return
        deadline = time.monotonic() + max_s
        while True:
            now = time.monotonic()
            if now >= deadline or now - self.last_rx >= quiet_s:
                return
            time.sleep(min(0.02, deadline - now))

    def _wake(self) -> None:
        """An empty datagram ends the thread's wait now rather than at its next poll.

        Sent without blocking: on a full queue the thread is busy anyway and sees the stop
        flag after the datagram it is handling, so there is nothing to wait for.
        """
        with contextlib.suppress(OSError):
            waker = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            try:
                waker.setblocking(False)
                waker.sendto(b"", self.path)
            finally:
                waker.close()

    def stop(self, keep_dir: bool = False) -> None:
        """Stop the thread, take what is still queued (for a bounded time), close and (unless
        `keep_dir`: the rings are read after the last datagram, then `remove_dir`) remove the
        socket directory. Never blocks on the socket."""
        self._stop.set()
        if self._thread is not None:
            self._wake()
            self._thread.join(timeout=2.0)
        if self._thread is None or not self._thread.is_alive():
            self._drain()
        with contextlib.suppress(OSError):
            self.sock.close()
        if not keep_dir:
            self.remove_dir()

    def remove_dir(self) -> None:
        _rmtree(self.dir)

    def _drain(self) -> None:
        deadline = time.monotonic() + _DRAIN_MAX_S
        with contextlib.suppress(OSError):
            self.sock.setblocking(False)
            while time.monotonic() < deadline:
                try:
                    data = self._receive()
                except (BlockingIOError, InterruptedError):
                    break
                self.handle(data)
