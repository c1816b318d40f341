"""The dashboard's HTTP server: loopback only, read only, one page and its data.

Security is by construction: it binds 127.0.0.1 and nothing else; it answers only GET and
HEAD (405 for any other method: nothing it serves changes anything); and it refuses a request
whose Host header is not this port on localhost, 127.0.0.1 or [::1] (403), so a web page on
another site cannot reach it through a DNS name rebound to 127.0.0.1.

Routes: `/` the page; `/static/...` its files (packaged, no CDN); `/api/state` the snapshot
and the whole bounded history as JSON; `/api/events` the same as server-sent events, the
whole state first and then, about once a second, the snapshot and only the new points;
`/metrics` the Prometheus text (`exporters/prometheus.py`). A route is a function of the
request (`@route(path)`), answered on the one event loop of `exporters/httpd.py`: no number of
idle, slow or greedy local clients can hold the owner out or reach the run (`tm` serves them
from one thread, with a bounded table of connections).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from importlib import resources
from typing import Any

from ...exporters import httpd
from ...exporters.httpd import Request, Response, Stream
from .ports import HOST, bind_socket
from .state import DashboardState

#: Seconds between two server-sent events when nothing new comes (a comment keeps proxies open).
KEEPALIVE_S = 10.0

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".txt": "text/plain; charset=utf-8",
}
_LICENSE_TYPE = "text/plain; charset=utf-8"

#: The page loads only its own files; nothing inline runs, nothing is fetched from elsewhere.
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)


def _static_file(name: str) -> tuple[bytes, str] | None:
    """A packaged static file by its path under static/, or None. No path may climb out."""
    parts = [p for p in name.split("/") if p]
    if not parts or any(p in (".", "..") or p.startswith(".") or "\\" in p for p in parts):
        return None
    node = resources.files("trainmeter.views.web") / "static"
    for part in parts:
        node = node / part
    try:
        if not node.is_file():
            return None
        data = node.read_bytes()
    except OSError:
        return None
    suffix = "." + parts[-1].rsplit(".", 1)[-1] if "." in parts[-1] else ""
    return data, _TYPES.get(suffix, _LICENSE_TYPE)


def _metrics_renderer() -> Any:
    """`render(snapshot, labels)` from the Prometheus exporter, or None when it cannot load."""
    try:
        from ...exporters.prometheus import render
    except ImportError:
        return None
    return render


#: Connections held at once (fewer when `tm` has few descriptors): see `exporters/httpd.py`
#: for who gives way when the table is full (whoever has done least for its client lately).
MAX_CONNECTIONS = httpd.MAX_CONNECTIONS
#: A connection that has not sent a whole request this long after it became idle is closed.
CONNECTION_TIMEOUT_S = httpd.REQUEST_TIMEOUT_S

Route = Callable[["DashboardServer", Request], Response]
#: Exact paths and what answers them (the page, its data, the metrics); `/static/` and
#: `/api/events` (a stream) are answered in `DashboardServer._handle`.
ROUTES: dict[str, Route] = {}


def route(*paths: str) -> Callable[[Route], Route]:
    """Register a GET (and HEAD) route: `@route("/api/x") def x(server, request) -> Response`."""

    def register(fn: Route) -> Route:
        for path in paths:
            ROUTES[path] = fn
        return fn

    return register


def page(
    code: int,
    body: bytes,
    ctype: str,
    cache: str = "no-store",
    close: bool = False,
    extra: dict[str, str] | None = None,
) -> Response:
    """A response with the page's headers (the policy above, no framing, no referrer)."""
    headers = {
        "Cache-Control": cache,
        "X-Content-Type-Options": "nosniff",
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "no-referrer",
        "Content-Security-Policy": _CSP,
        **(extra or {}),
    }
    return Response(code, body, ctype, headers, close)


def plain(code: int, text: bytes, close: bool = False, extra: dict[str, str] | None = None) -> Response:
    return page(code, text, "text/plain", close=close, extra=extra)


@route("/", "/index.html")
def _index(server: DashboardServer, request: Request) -> Response:
    found = _static_file("index.html")
    if found is None:
        return plain(404, b"not found\n")
    return page(200, found[0], found[1])


@route("/api/state")
def _api_state(server: DashboardServer, request: Request) -> Response:
    return page(200, server.full_state()[0], "application/json")


@route("/metrics")
def _metrics(server: DashboardServer, request: Request) -> Response:
    if server.metrics is None:
        return plain(404, b"not found\n")
    state = server.state
    snap = state.snapshot
    # the run directory's name, as the --metrics-addr endpoint labels it: two runs given
    # one --name stay two series
    name = os.path.basename(str(state.run_dir).rstrip("/\\")) if state.run_dir else None
    if not name:
        name = (snap.get("run") or {}).get("name") if isinstance(snap, dict) else None
    try:
        body, ctype = server.metrics(snap, {"run": name or "run"})
    except Exception as exc:  # noqa: BLE001 - a broken exporter is one 500, not a dead server
        return plain(500, f"metrics failed: {exc!r}\n".encode())
    return page(200, body if isinstance(body, bytes) else str(body).encode(), ctype)


class _Events(Stream):
    """`/api/events`: the whole state, then, at each new snapshot, the snapshot and only the
    new points; a comment after `KEEPALIVE_S` of silence keeps proxies open. The loop asks for
    the next message only once the client has read the last, so a reader that falls behind
    skips to the present (what is new since what it read), never a queue of old messages."""

    headers = {
        "Content-Type": "text/event-stream; charset=utf-8",
        "Cache-Control": "no-store",
        "X-Content-Type-Options": "nosniff",
    }

    def __init__(self, server: DashboardServer) -> None:
        self.server = server
        self.version = -1
        self.marks: dict[str, Any] | None = None
        self.seq = -1
        self.sent = time.monotonic()

    def _frame(self, text: bytes, marks: dict[str, Any], seq: int, version: int) -> bytes:
        self.marks, self.seq, self.version = marks, seq, version
        self.sent = time.monotonic()
        return b"data: " + text + b"\n\n"

    def first(self) -> bytes:
        return self._frame(*self.server.full_state())

    def next(self, now: float) -> bytes | None:
        state = self.server.state
        if state.closed or self.server.stopping.is_set():
            return Stream.END
        if state.seq != self.seq:
            return self._frame(*self.server.delta(self.version, self.marks))
        if now - self.sent >= KEEPALIVE_S:
            self.sent = now
            return b": keep-alive\n\n"
        return None


class DashboardServer(httpd.LoopServer):
    """The dashboard on one event loop: `ROUTES`, `/static/...` and `/api/events`, once the
    method and the Host header are checked."""

    def __init__(self, state: DashboardState, sock: socket.socket) -> None:
        """Serve `state` on `sock`, a socket already bound and listening (`ports.bind_socket`)."""
        self.state = state
        self.stopping = threading.Event()
        self.metrics = _metrics_renderer()
        super().__init__(sock, self._handle)
        # every reader of one version gets the same bytes: made once, shared by all of them
        self._full: tuple[bytes, dict[str, Any], int, int] | None = None
        self._deltas: dict[int, tuple[bytes, dict[str, Any], int, int]] = {}
        self._deltas_at = -1
        state.listeners.append(self.wake)

    def _host_ok(self, request: Request) -> bool:
        host = (request.header("host") or "").strip().lower()
        port = self.port
        allowed = {f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"}
        if port == 80:
            allowed |= {"localhost", "127.0.0.1", "[::1]"}
        return host in allowed

    def _handle(self, request: Request) -> Response | Stream:
        if request.method not in ("GET", "HEAD"):
            # a body it may carry is not read: no second request after it
            return plain(405, b"only GET and HEAD: this dashboard changes nothing\n",
                         close=True, extra={"Allow": "GET, HEAD"})
        if not self._host_ok(request):
            return plain(403, b"this dashboard answers only to localhost on its own port\n",
                         close=True)
        path = request.path
        answer = ROUTES.get(path)
        if answer is not None:
            return answer(self, request)
        if path == "/api/events":
            return _Events(self)
        if path.startswith("/static/"):
            found = _static_file(path[len("/static/"):])
            if found:
                return page(200, found[0], found[1], cache="max-age=300")
        return plain(404, b"not found\n")

    def full_state(self) -> tuple[bytes, dict[str, Any], int, int]:
        """(the whole state as JSON, its history marks, its seq, its version), made once a
        version."""
        full = self._full
        if full is None or full[3] != self.state.version:
            text, marks, seq, version = self.state.message_at()
            self._full = full = (text.encode(), marks, seq, version)
        return full

    def delta(
        self, since: int, marks: dict[str, Any] | None
    ) -> tuple[bytes, dict[str, Any], int, int]:
        """What is new since version `since` (whose history `marks` a reader holds), made once
        for all the readers at that version."""
        now = self.state.version
        if self._deltas_at != now:
            self._deltas, self._deltas_at = {}, now
        found = self._deltas.get(since)
        if found is None:
            text, new_marks, seq, version = self.state.message_at(marks)
            found = (text.encode(), new_marks, seq, version)
            if version == now:
                self._deltas[since] = found
        return found

    def settle(self, timeout: float) -> bool:
        """Wait, at most `timeout`, until every open event stream has handed the kernel the
        latest snapshot (the final one, at the end of a run): what the kernel holds reaches the
        page even once `tm` has exited, so the page ends on the run's own numbers, not on the
        last live ones and "connection lost". True when all had it in time."""
        target = self.state.seq
        deadline = time.monotonic() + timeout
        while True:
            behind = [s for s, waiting in self.streams()
                      if isinstance(s, _Events) and (s.seq < target or waiting)]
            if not behind:
                return True
            if time.monotonic() >= deadline:
                return False
            self.wake()
            time.sleep(0.002)

    def shutdown(self) -> None:
        self.stopping.set()
        super().shutdown()

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/"


def bind(state: DashboardState, port: int | None) -> DashboardServer:
    """A server on the first free port from `port` (default 8765); 0 takes any free port."""
    return DashboardServer(state, bind_socket(port))


def run_in_thread(server: DashboardServer) -> None:
    httpd.serve_in_thread(server, "trainmeter-web")


def serve(state: DashboardState, port: int | None) -> DashboardServer:
    """Bind and serve on a daemon thread; the caller stops it with `stop(server)`."""
    server = bind(state, port)
    run_in_thread(server)
    return server


def stop(server: DashboardServer) -> None:
    server.stopping.set()
    server.state.close()
    server.shutdown()
    server.server_close()
