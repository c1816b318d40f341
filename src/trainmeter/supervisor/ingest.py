"""The ingest socket: where the agents' datagrams arrive.

An AF_UNIX datagram socket in a private directory (`tempfile.mkdtemp` makes it 0700, so no other
user can send into the run: promise 8). The receive buffer is raised as far as the kernel lets
us so a burst is queued, not dropped. One thread receives, splits each datagram into lines,
decodes each with `records.decode`, and hands good records to the sink; a malformed line is
dropped and counted, and the count reaches the log as the fact `ingest_dropped`. The loop does
nothing else, so it keeps up with a high datagram rate.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

from .. import records

RCVBUF_BYTES = 8 << 20
_RECV_SIZE = 1 << 17  # above records.MAX_DATAGRAM, so a datagram is never cut
_POLL_S = 0.1

Sink = Callable[[bytes, dict[str, Any]], None]


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


def decode_counted(line: bytes, reasons: dict[str, int]) -> dict[str, Any] | None:
    """The record on `line`, or None with the reason (the error's first word) counted."""
    try:
        return records.decode(line)
    except records.RecordError as exc:
        reason = str(exc).split(":", 1)[0]
        reasons[reason] = reasons.get(reason, 0) + 1
        return None


class Ingest:
    """Owns the socket, its directory and the receiving thread."""

    def __init__(self, sink: Sink, rcvbuf: int = RCVBUF_BYTES) -> None:
        self.sink = sink
        self.dir = tempfile.mkdtemp(prefix="trainmeter-")
        self.path = os.path.join(self.dir, "ingest.sock")
        self.received = 0  # good records
        self.datagrams = 0
        self.dropped = 0  # malformed lines
        self.drop_reasons: dict[str, int] = {}
        self.last_rx = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        try:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            self.rcvbuf = _raise_rcvbuf(self.sock, rcvbuf)
            self.sock.bind(self.path)
            self.sock.settimeout(_POLL_S)
        except OSError:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="trainmeter-ingest", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        recv = self.sock.recv
        while not self._stop.is_set():
            try:
                data = recv(_RECV_SIZE)
            except TimeoutError:
                continue
            except OSError:
                if self._stop.is_set():
                    return
                continue
            self.handle(data)

    def handle(self, data: bytes) -> None:
        """Split one datagram into records; count what does not decode."""
        if not data:
            return  # the wake-up datagram, or an empty one: nothing to count
        self.datagrams += 1
        self.last_rx = time.monotonic()
        for line in data.split(b"\n"):
            line = line.strip()
            if not line:
                continue
            record = decode_counted(line, self.drop_reasons)
            if record is None:
                self.dropped += 1
                continue
            self.received += 1
            try:
                self.sink(line, record)
            except Exception:  # noqa: BLE001 - the sink never raises; if it did, keep receiving
                pass

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
        """An empty datagram ends the thread's wait now rather than at its next poll."""
        with contextlib.suppress(OSError):
            waker = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            try:
                waker.sendto(b"", self.path)
            finally:
                waker.close()

    def stop(self) -> None:
        """Stop the thread, take what is still queued, close and remove the socket directory."""
        self._stop.set()
        if self._thread is not None:
            self._wake()
            self._thread.join(timeout=2.0)
        with contextlib.suppress(OSError):
            self.sock.setblocking(False)
            while True:
                try:
                    data = self.sock.recv(_RECV_SIZE)
                except (BlockingIOError, InterruptedError):
                    break
                self.handle(data)
        with contextlib.suppress(OSError):
            self.sock.close()
        shutil.rmtree(self.dir, ignore_errors=True)
