"""One-way, never-blocking delivery of records from a training process to `tm`.

Why it looks like this:

- The hot path is the user's. `send()` appends a small dict to a deque (thread-safe, no lock,
  no JSON); aggregators (steps, emitted values) register a *drain* callback instead of sending
  per event. A daemon thread wakes every `interval` seconds, drains, encodes and sends, so at
  most ~20 step records a second leave a rank, and a record is never older than one interval
  when the process is killed.
- Datagrams over a Unix socket: no connection to keep, no ordering to wait for. Several records
  go in one datagram, newline separated, up to `records.MAX_DATAGRAM` bytes.
- A full socket buffer keeps the datagram for the next tick (bounded), then drops and counts;
  the count reaches `tm` as the fact `agent_dropped_records`.
- A supervisor that is gone (the socket path refuses) makes the sender go quiet for good.
- After `fork()` the child gets a fresh socket and a fresh thread (DataLoader workers fork).
"""

from __future__ import annotations

import atexit
import collections
import os
import socket
import threading
import time

from .. import records
from ..records import ENV_SOCKET

TYPE_CHECKING = False  # typing costs ~9 ms at start-up in every Python the run starts
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

SOCKET_ENV = ENV_SOCKET
INTERVAL_S = 0.05
_MAX_BACKLOG = 256  # datagrams kept while the receiver is full, then dropped and counted


def _rank_from_env() -> int | None:
    for name in ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        try:
            return int(os.environ[name])
        except (KeyError, ValueError):  # unset, or not a number ("--1", "²"): look further
            continue
    return None


class Sender:
    """Queues records and ships them from a background thread. Never raises to its caller."""

    def __init__(self, path: str, interval: float = INTERVAL_S) -> None:
        self.path = path
        self.interval = interval
        self.rank = _rank_from_env()
        self.pid = os.getpid()
        self.quiet = False
        self.dropped = 0
        self._reported_dropped = 0
        self._queue: collections.deque[dict[str, Any]] = collections.deque()
        self._drains: list[Callable[[], None]] = []
        self._backlog: collections.deque[bytes] = collections.deque()
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()
        self._lock = threading.Lock()  # one flusher at a time (thread, atexit, explicit flush)
        self._start_lock = threading.Lock()  # apart: a drain may send, and sending may start

    # ---- the cheap side, called from the training loop ----------------------------------

    def send(self, kind: str, d: dict[str, Any], src: str = "agent", t: float | None = None) -> None:
        """Queue one record. Costs a dict and a deque append."""
        if self.quiet:
            return
        self._queue.append(
            {
                "v": records.VERSION,
                "t": time.monotonic() if t is None else t,
                "src": src,
                "rank": self.rank,
                "pid": self.pid,
                "kind": kind,
                "d": d,
            }
        )
        if self._thread is None:
            self._start()

    def add_drain(self, drain: Callable[[], None]) -> None:
        """Register a callback the flusher calls before each send, to turn state into records."""
        self._drains.append(drain)
        if self._thread is None:
            self._start()

    # ---- the background side -------------------------------------------------------------

    def _start(self) -> None:
        with self._start_lock:
            if self._thread is not None or self.quiet:
                return
            thread = threading.Thread(target=self._run, name="trainmeter-sender", daemon=True)
            self._thread = thread
        thread.start()

    def _run(self) -> None:
        while not self.quiet:
            self._wake.wait(self.interval)
            self._wake.clear()
            self.flush()

    def flush(self) -> None:
        """Drain aggregators, encode the queue and send it. Safe from any thread."""
        try:
            with self._lock:
                self._flush_locked()
        except Exception:  # noqa: BLE001 - promise 1: delivery problems never reach the loop
            pass

    def _flush_locked(self) -> None:
        if self.quiet:
            return
        for drain in list(self._drains):
            try:
                drain()
            except Exception:  # noqa: BLE001 - a broken aggregator is dropped, the rest go on
                self._drains.remove(drain)
        if self.dropped != self._reported_dropped:
            self._reported_dropped = self.dropped
            self._queue.append(
                records.make(
                    "fact",
                    {"key": "agent_dropped_records", "value": self.dropped, "source": "detected"},
                    t=time.monotonic(),
                    src="agent",
                    rank=self.rank,
                    pid=self.pid,
                )
            )
        lines: list[bytes] = []
        size = 0
        while self._queue:
            record = self._queue.popleft()
            try:
                line = records.encode(record).encode("utf-8")
            except records.RecordError:
                self.dropped += 1
                continue
            if len(line) > records.MAX_DATAGRAM:
                self.dropped += 1
                continue
            if size + len(line) + 1 > records.MAX_DATAGRAM and lines:
                self._backlog.append(b"\n".join(lines))
                lines, size = [], 0
            lines.append(line)
            size += len(line) + 1
        if lines:
            self._backlog.append(b"\n".join(lines))
        self._ship()

    def flush_at_exit(self, timeout: float = 2.0) -> None:
        """The last flush: wait (briefly) for a busy receiver instead of dropping the tail."""
        deadline = time.monotonic() + timeout
        self.flush()
        while self._backlog and not self.quiet and time.monotonic() < deadline:
            time.sleep(0.005)
            self.flush()

    def _ship(self) -> None:
        sock = self._socket()
        while self._backlog and not self.quiet:
            datagram = self._backlog[0]
            try:
                sock.sendto(datagram, self.path)
            except BlockingIOError:
                break  # the receiver is behind: keep it for the next tick
            except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError):
                self.go_quiet()
                return
            except OSError:
                self.dropped += datagram.count(b"\n") + 1
            self._backlog.popleft()
        while len(self._backlog) > _MAX_BACKLOG:
            self.dropped += self._backlog.popleft().count(b"\n") + 1

    def _socket(self) -> socket.socket:
        if self._sock is None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            sock.setblocking(False)
            try:  # room for a few full datagrams in flight (capped by net.core.wmem_max)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
            except OSError:
                pass
            self._sock = sock
        return self._sock

    def go_quiet(self) -> None:
        """The supervisor is gone: stop sending and forget what was queued, for good."""
        self.quiet = True
        self._queue.clear()
        self._backlog.clear()
        self._wake.set()

    def after_fork(self) -> None:
        """In a forked child: own socket, own thread, own pid; nothing of the parent's queue."""
        self.pid = os.getpid()
        self._sock = None
        self._thread = None
        self._lock = threading.Lock()
        self._start_lock = threading.Lock()
        self._wake = threading.Event()
        self._queue.clear()
        self._backlog.clear()


_sender: Sender | None = None
_sender_checked = False


def get_sender() -> Sender | None:
    """The process's sender, or None outside `tm` or once the supervisor is gone."""
    global _sender, _sender_checked
    if not _sender_checked:
        _sender_checked = True
        path = os.environ.get(SOCKET_ENV)
        if path:
            _sender = Sender(path)
            atexit.register(_sender.flush_at_exit)
    if _sender is not None and _sender.quiet:
        return None
    return _sender


def _after_fork_in_child() -> None:
    if _sender is not None:
        _sender.after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
