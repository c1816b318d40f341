"""One small HTTP/1.1 server for `tm`'s read-only endpoints (the dashboard, `--metrics-addr`):
one thread, one event loop, a bounded table of connections, so no number of idle or slow
clients can lock the owner out or take `tm`'s threads and descriptors from the run.

Why not `http.server`: its threading server gives every connection a thread that blocks reading
the request. With a bound on threads, a few dozen connections that never finish a request hold
every slot (32 idle ones locked the dashboard's owner out for as long as they stayed); with
none, each takes a thread and a descriptor of `tm`, which the run needs for its rings and its
log. Here a connection is a descriptor and a few hundred bytes, and only while it is in the
table:

- at most `max_connections` connections are held (fewer when `tm` has few descriptors). When
  the table is full, a new connection takes the place of the one that has gone longest without
  doing anything for its client: a connection that never sent a whole request (idle, or
  dribbling its headers), or one whose client stopped reading. Dribbled header bytes are not
  progress; a finished request and bytes the client read are. So a client that sends its
  request at once (a browser, `curl`, a scraper) is always served, whatever else is connected;
- a request's head must arrive whole within `REQUEST_TIMEOUT_S` of the connection's becoming
  idle (a byte every second does not extend it) and be at most `MAX_HEAD` bytes;
- a response the client stops reading is dropped after `STALL_S` without progress;
- only GET and HEAD are answered (405 otherwise); a request with a body is answered and the
  connection closed (its body is never read);
- an event stream (server-sent events) is a `Stream`: the loop asks it for its next bytes only
  when the client has read everything before them, so a client that does not read costs no
  memory past one message.

The endpoint's own logic is a function `handle(request) -> Response | Stream`, run on the loop's
thread: what it does must be quick (a cached body, a rendered snapshot).
"""

from __future__ import annotations

import collections
import errno
import re
import resource
import selectors
import socket
import threading
import time
from collections.abc import Callable
from http import HTTPStatus

from ..plain import Plain

#: Connections held at most (the table); a lower bound follows from the descriptor limit.
MAX_CONNECTIONS = 64
#: Seconds a connection may take, from becoming idle, to send a whole request head.
REQUEST_TIMEOUT_S = 10.0
#: Seconds a response may go without the client reading a byte of it.
STALL_S = 30.0
#: Seconds without a byte read after which a client is taken to have stopped reading (it is
#: then among the first to give way to a new connection).
STALLED_S = 1.0
#: The longest request head (request line and headers) read.
MAX_HEAD = 16384
#: Connections accepted per turn of the loop, so a flood of new ones cannot starve the reads.
ACCEPT_BATCH = 16
_RECV = 65536
#: A header's name: an HTTP token (RFC 9110), nothing else.
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def http_date(now: float | None = None) -> str:
    """The Date header's IMF-fixdate (RFC 9110), `email.utils.formatdate(now, usegmt=True)`:
    English names whatever the locale. Written here: importing `email` for it cost ~24M
    instructions (3-5 ms) of `tm view`'s start."""
    t = time.gmtime(now)
    return (f"{_DAYS[t.tm_wday]}, {t.tm_mday:02d} {_MONTHS[t.tm_mon - 1]} {t.tm_year:04d} "
            f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} GMT")


class Request(Plain):
    """A parsed request head. Plain classes here, not dataclasses: `dataclasses` imports
    `inspect` (~8 ms of `tm view`'s start; see `plain.py`)."""

    def __init__(self, method: str, target: str, version: str, headers: dict[str, str]) -> None:
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers


    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0].split("#", 1)[0]

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


class Response(Plain):
    def __init__(
        self,
        code: int,
        body: bytes = b"",
        ctype: str = "text/plain; charset=utf-8",
        headers: dict[str, str] | None = None,
        close: bool = False,
    ) -> None:
        self.code = code
        self.body = body
        self.ctype = ctype
        self.headers: dict[str, str] = {} if headers is None else headers
        self.close = close



class Stream:
    """An open-ended response (server-sent events). The loop sends `head` and `first()`, then
    calls `next(now)` whenever the client has read everything sent so far: bytes to send, None
    for nothing yet, or `Stream.END` to close."""

    END = b""
    headers: dict[str, str] = {}

    def first(self) -> bytes:
        return b""

    def next(self, now: float) -> bytes | None:
        return None


class _Conn:
    __slots__ = ("sock", "fd", "inbuf", "out", "idle_since", "progress", "close_after", "stream",
                 "events", "head_method")

    def __init__(self, sock: socket.socket, now: float) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.inbuf = bytearray()
        self.out: collections.deque[memoryview] = collections.deque()
        self.idle_since = now  # waiting for a request since (None while answering)
        self.progress = now  # the last time it did something for its client
        self.close_after = False
        self.stream: Stream | None = None
        self.events = 0
        self.head_method = False


def connection_cap(wanted: int = MAX_CONNECTIONS) -> int:
    """`wanted`, or fewer when `tm` may hold few descriptors: a quarter of what the limit leaves
    past 64 for the run itself (rings, the log, the samplers)."""
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return wanted
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(4, min(wanted, (soft - 64) // 4))


def _head_end(buf: bytearray) -> int:
    """The index just past the blank line that ends a request head, or -1."""
    crlf = buf.find(b"\r\n\r\n")
    lf = buf.find(b"\n\n")
    ends = [i + 4 for i in (crlf,) if i >= 0] + [i + 2 for i in (lf,) if i >= 0]
    return min(ends) if ends else -1


def parse_head(head: bytes) -> Request | None:
    """The request in a head (request line and headers), or None when it is not HTTP/1.x."""
    lines = head.decode("latin-1").replace("\r\n", "\n").split("\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1.") or not parts[0].isalpha():
        return None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, colon, value = line.partition(":")
        if not colon or _TOKEN.fullmatch(name) is None:
            return None  # no colon, a space in the name, or a folded line: ambiguous
        key = name.lower()
        if key in headers and key in ("host", "content-length", "transfer-encoding"):
            return None  # two of these: which one a proxy read is anyone's guess
        headers[key] = value.strip()
    return Request(parts[0], parts[1], parts[2], headers)


def _reason(code: int) -> str:
    try:
        return HTTPStatus(code).phrase
    except ValueError:
        return "Unknown"


class LoopServer:
    """Serves `handle` on a listening socket from one thread (`serve_forever`)."""

    def __init__(
        self,
        sock: socket.socket,
        handle: Callable[[Request], Response | Stream],
        max_connections: int | None = None,
    ) -> None:
        self.socket = sock
        self.handle = handle
        self.server_address = sock.getsockname()
        self.port = self.server_address[1]
        self.max_connections = max_connections or connection_cap()
        self.evicted = 0  # connections closed to make room for a new one
        self.refused = 0  # connections closed at once (no descriptor to spare)
        self.timed_out = 0  # requests not sent whole in time, responses not read
        self.served = 0
        self._conns: dict[int, _Conn] = {}
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._stop = threading.Event()
        self._running = threading.Event()
        self._done = threading.Event()
        self._listen_paused_until = 0.0
        self._behind: list[_Conn] = []  # connections with a whole request already read

    # ---- the outside ------------------------------------------------------------------------

    @property
    def active(self) -> int:
        return len(self._conns)

    def wake(self) -> None:
        """Have the loop look at its streams now (called from other threads). Never blocks."""
        try:
            self._wake_w.send(b"\0")
        except OSError:
            pass  # a full pipe: the loop is already due to wake

    def streams(self) -> list[tuple[Stream, bool]]:
        """(stream, whether bytes of it wait to go out) for each open stream. Safe to call from
        another thread to poll: it copies the table, which the loop changes by whole entries."""
        return [(c.stream, bool(c.out)) for c in list(self._conns.values()) if c.stream is not None]

    def shutdown(self) -> None:
        """Stop the loop and wait until it has (at once when it never ran)."""
        self._stop.set()
        self.wake()
        if self._running.is_set():
            self._done.wait(5.0)

    def server_close(self) -> None:
        for conn in list(self._conns.values()):
            self._close(conn)
        for sock in (self.socket, self._wake_r, self._wake_w):
            try:
                sock.close()
            except OSError:
                pass
        try:
            self._sel.close()
        except (OSError, ValueError):
            pass

    def serve_forever(self, poll_interval: float = 0.2) -> None:
        self._running.set()
        try:
            self.socket.setblocking(False)
            self._sel.register(self.socket, selectors.EVENT_READ, None)
            self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
            while not self._stop.is_set():
                try:
                    self._turn(poll_interval)
                except Exception:  # noqa: BLE001 - one bad turn never ends the loop
                    time.sleep(0.01)
        finally:
            self._done.set()

    # ---- the loop ---------------------------------------------------------------------------

    def _turn(self, poll_interval: float) -> None:
        now = time.monotonic()
        if self._listen_paused_until and now >= self._listen_paused_until:
            self._listen_paused_until = 0.0
            self._sel.register(self.socket, selectors.EVENT_READ, None)
        for key, mask in self._sel.select(poll_interval):
            if key.data is None:
                self._accept()
            elif key.data == "wake":
                try:
                    while self._wake_r.recv(4096):
                        pass
                except OSError:
                    pass
            else:
                conn = key.data
                if mask & selectors.EVENT_WRITE:
                    self._guard(self._write, conn)
                if mask & selectors.EVENT_READ and self._conns.get(conn.fd) is conn:
                    self._guard(self._read, conn)
        behind, self._behind = self._behind, []
        for conn in behind:
            if self._conns.get(conn.fd) is conn and conn.idle_since is not None:
                self._guard(self._next_request, conn)
        self._tick(time.monotonic())

    def _guard(self, step: Callable[[_Conn], None], conn: _Conn) -> None:
        try:
            step(conn)
        except Exception:  # noqa: BLE001 - a connection that fails is closed, nothing else
            self._close(conn)

    def _accept(self) -> None:
        for _ in range(ACCEPT_BATCH):
            try:
                sock, _ = self.socket.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    # no descriptor to spare: stop listening a moment (the kernel keeps the
                    # backlog) rather than spin on a socket that is always ready
                    self.refused += 1
                    self._evict_one()
                    self._sel.unregister(self.socket)
                    self._listen_paused_until = time.monotonic() + 0.1
                return
            if len(self._conns) >= self.max_connections:
                self._evict_one()  # only once one has come: the batch's last try finds none
            sock.setblocking(False)
            conn = _Conn(sock, time.monotonic())
            self._conns[conn.fd] = conn
            self._sel.register(sock, selectors.EVENT_READ, conn)
            # a client that sent its request with the connection (a browser, a scraper) is
            # answered now, before any newcomer of this turn can take its place
            self._guard(self._read, conn)

    def _evict_one(self) -> None:
        """Close the connection that has gone longest without doing anything for its client:
        first those with no whole request (idle, slow headers) or whose client stopped
        reading, then the others (streams, answers going out), each oldest first."""
        if not self._conns:
            return
        now = time.monotonic()

        def worth(conn: _Conn) -> tuple[int, float]:
            stalled = bool(conn.out) and now - conn.progress > STALLED_S
            return (0 if conn.idle_since is not None or stalled else 1, conn.progress)

        victim = min(self._conns.values(), key=worth)
        self.evicted += 1
        self._close(victim)

    def _tick(self, now: float) -> None:
        for conn in list(self._conns.values()):
            if conn.out:
                if now - conn.progress > STALL_S:
                    self.timed_out += 1
                    self._close(conn)
            elif conn.idle_since is not None:
                if now - conn.idle_since > REQUEST_TIMEOUT_S:
                    self.timed_out += 1
                    self._close(conn)
            elif conn.stream is not None:
                self._guard(lambda c: self._feed_stream(c, now), conn)

    # ---- one connection ---------------------------------------------------------------------

    def _read(self, conn: _Conn) -> None:
        try:
            data = conn.sock.recv(_RECV)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(conn)
            return
        if not data:
            self._close(conn)
            return
        if conn.stream is not None:
            conn.inbuf += data  # a stream's client has nothing to say: bounded, then closed
            if len(conn.inbuf) > MAX_HEAD:
                self._close(conn)
            return
        conn.inbuf += data
        if len(conn.inbuf) > 2 * MAX_HEAD:  # requests sent ahead, far past any browser's
            self._answer(conn, Response(431, b"too much sent ahead\n", close=True))
            return
        self._next_request(conn)

    def _next_request(self, conn: _Conn) -> None:
        """Answer the request whose head is whole in the buffer, if there is one."""
        end = _head_end(conn.inbuf)
        if end < 0:
            if len(conn.inbuf) > MAX_HEAD:
                self._answer(conn, Response(431, b"request head too large\n", close=True))
            return
        head, rest = bytes(conn.inbuf[:end]), conn.inbuf[end:]
        conn.inbuf = bytearray(rest)
        if end > MAX_HEAD:
            self._answer(conn, Response(431, b"request head too large\n", close=True))
            return
        request = parse_head(head.lstrip(b"\r\n"))
        if request is None:
            self._answer(conn, Response(400, b"bad request\n", close=True))
            return
        conn.head_method = request.method == "HEAD"
        try:
            result = self.handle(request)
        except Exception as exc:  # noqa: BLE001 - a failing route is one 500, not a dead loop
            result = Response(500, f"internal error: {exc!r}\n".encode(), close=True)
        closing = (
            request.version == "HTTP/1.0"
            and (request.header("connection") or "").lower() != "keep-alive"
            or (request.header("connection") or "").lower() == "close"
            or bool(request.header("transfer-encoding"))
            or (request.header("content-length") or "0").strip() not in ("", "0")
        )
        if isinstance(result, Stream):
            self._start_stream(conn, result)
            return
        if closing:
            result.close = True
        self._answer(conn, result)

    def _head(self, code: int, headers: dict[str, str]) -> bytes:
        lines = [f"HTTP/1.1 {code} {_reason(code)}", "Server: trainmeter",
                 f"Date: {http_date()}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def _answer(self, conn: _Conn, response: Response) -> None:
        headers = {"Content-Type": response.ctype, "Content-Length": str(len(response.body)),
                   **response.headers}
        if response.close:
            headers["Connection"] = "close"
        self._send(conn, self._head(response.code, headers))
        if not conn.head_method and response.body:
            self._send(conn, response.body)
        self.served += 1
        conn.close_after = response.close
        conn.idle_since = None
        conn.progress = time.monotonic()  # a whole request is progress
        self._flush(conn)

    def _start_stream(self, conn: _Conn, stream: Stream) -> None:
        headers = {**stream.headers, "Connection": "close"}
        self._send(conn, self._head(200, headers))
        conn.idle_since = None
        conn.progress = time.monotonic()
        self.served += 1
        if conn.head_method:
            conn.close_after = True
        else:
            conn.stream = stream
            first = stream.first()
            if first:
                self._send(conn, first)
        self._flush(conn)

    def _feed_stream(self, conn: _Conn, now: float) -> None:
        assert conn.stream is not None
        data = conn.stream.next(now)
        if data is None:
            return
        if data == Stream.END:
            self._close(conn)
            return
        self._send(conn, data)
        self._flush(conn)

    def _send(self, conn: _Conn, data: bytes) -> None:
        conn.out.append(memoryview(data))

    def _flush(self, conn: _Conn) -> None:
        """Write what the socket takes now; wait for writability for the rest."""
        sent_any = False
        while conn.out:
            chunk = conn.out[0]
            try:
                n = conn.sock.send(chunk)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                self._close(conn)
                return
            sent_any = True
            if n < len(chunk):
                conn.out[0] = chunk[n:]
                break
            conn.out.popleft()
        if sent_any:
            conn.progress = time.monotonic()
        self._arm(conn)

    def _write(self, conn: _Conn) -> None:
        self._flush(conn)

    def _arm(self, conn: _Conn) -> None:
        """Listen for what the connection needs next: to write, or to read a request."""
        if self._conns.get(conn.fd) is not conn:
            return
        if conn.out:
            self._sel.modify(conn.sock, selectors.EVENT_WRITE, conn)
            return
        if conn.close_after:
            self._close(conn)
            return
        self._sel.modify(conn.sock, selectors.EVENT_READ, conn)
        if conn.stream is None and conn.idle_since is None:
            now = time.monotonic()
            conn.idle_since = now  # the response is out: waiting for the next request
            conn.progress = now
            if conn.inbuf:
                self._behind.append(conn)  # a request sent behind the last one: next turn

    def _close(self, conn: _Conn) -> None:
        if self._conns.get(conn.fd) is conn:
            del self._conns[conn.fd]
            try:
                self._sel.unregister(conn.sock)
            except (KeyError, ValueError, OSError):
                pass
        try:
            conn.sock.close()
        except OSError:
            pass
        conn.out.clear()


def serve_in_thread(server: LoopServer, name: str, poll_interval: float = 0.2) -> threading.Thread:
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": poll_interval}, name=name,
        daemon=True,
    )
    thread.start()
    return thread
