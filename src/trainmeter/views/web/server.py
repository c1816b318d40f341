"""The dashboard's HTTP server: loopback only, read only, one page and its data.

Security is by construction: it binds 127.0.0.1 and nothing else; it answers only GET and
HEAD (405 for any other method: nothing it serves changes anything); and it refuses a request
whose Host header is not this port on localhost, 127.0.0.1 or [::1] (403), so a web page on
another site cannot reach it through a DNS name rebound to 127.0.0.1.

Routes: `/` the page; `/static/...` its files (packaged, no CDN); `/api/state` the snapshot
and the whole bounded history as JSON; `/api/events` the same as server-sent events, the
whole state first and then, about once a second, the snapshot and only the new points;
`/metrics` the Prometheus text (`exporters/prometheus.py`).
"""

from __future__ import annotations

import os
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any

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


#: Connections served at once: each holds a thread and a descriptor of `tm`, which also needs
#: descriptors for the run itself; past this a connection is closed at once (and counted).
MAX_CONNECTIONS = 32
#: A connection that sends nothing (or stops reading) for this long is closed.
CONNECTION_TIMEOUT_S = 30.0


class _Handler(BaseHTTPRequestHandler):
    server: DashboardServer
    server_version = "trainmeter"
    sys_version = ""
    protocol_version = "HTTP/1.1"
    timeout = CONNECTION_TIMEOUT_S  # set on the socket in setup(): idle clients cannot stay

    # Every method but GET and HEAD: 405, whatever its name (the base class would say 501).
    def __getattr__(self, name: str) -> Any:
        if name.startswith("do_"):
            return self._not_allowed
        raise AttributeError(name)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass  # the training's terminal is not ours to write on

    def _not_allowed(self) -> None:
        self.close_connection = True  # a body it may carry is not read: no second request after
        self._send(405, b"only GET and HEAD: this dashboard changes nothing\n", "text/plain",
                   extra={"Allow": "GET, HEAD"})

    def _host_ok(self) -> bool:
        host = (self.headers.get("Host") or "").strip().lower()
        port = self.server.port
        allowed = {f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"}
        if port == 80:
            allowed |= {"localhost", "127.0.0.1", "[::1]"}
        return host in allowed

    def _send(
        self,
        code: int,
        body: bytes,
        ctype: str,
        extra: dict[str, str] | None = None,
        cache: str = "no-store",
    ) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", cache)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("X-Frame-Options", "DENY")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Content-Security-Policy", _CSP)
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        if not self._host_ok():
            self.close_connection = True
            self._send(403, b"this dashboard answers only to localhost on its own port\n",
                       "text/plain")
            return
        path = self.path.split("?", 1)[0].split("#", 1)[0]
        if path in ("/", "/index.html"):
            found = _static_file("index.html")
            if found:
                self._send(200, found[0], found[1])
                return
        elif path.startswith("/static/"):
            found = _static_file(path[len("/static/"):])
            if found:
                self._send(200, found[0], found[1], cache="max-age=300")
                return
        elif path == "/api/state":
            text, _, _ = self.server.state.message()
            self._send(200, text.encode(), "application/json")
            return
        elif path == "/api/events":
            self._events()
            return
        elif path == "/metrics" and self.server.metrics is not None:
            self._metrics()
            return
        self._send(404, b"not found\n", "text/plain")

    def _metrics(self) -> None:
        state = self.server.state
        snap = state.snapshot
        # the run directory's name, as the --metrics-addr endpoint labels it: two runs given
        # one --name stay two series
        name = os.path.basename(str(state.run_dir).rstrip("/\\")) if state.run_dir else None
        if not name:
            name = (snap.get("run") or {}).get("name") if isinstance(snap, dict) else None
        try:
            body, ctype = self.server.metrics(snap, {"run": name or "run"})
        except Exception as exc:  # noqa: BLE001 - a broken exporter is one 500, not a dead server
            self._send(500, f"metrics failed: {exc!r}\n".encode(), "text/plain")
            return
        self._send(200, body if isinstance(body, bytes) else str(body).encode(), ctype)

    def _events(self) -> None:
        """Server-sent events: the whole state, then what is new at each snapshot."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        if self.command == "HEAD":
            return
        state = self.server.state
        try:
            text, marks, seq = state.message()
            self.wfile.write(b"data: " + text.encode() + b"\n\n")
            self.wfile.flush()
            idle = 0.0
            while not state.closed and not self.server.stopping.is_set():
                new = state.wait(seq, 1.0)
                if new == seq:
                    idle += 1.0
                    if idle >= KEEPALIVE_S:
                        self.wfile.write(b": keep-alive\n\n")
                        self.wfile.flush()
                        idle = 0.0
                    continue
                idle = 0.0
                text, marks, seq = state.message(marks)
                self.wfile.write(b"data: " + text.encode() + b"\n\n")
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, TimeoutError):
            return


class DashboardServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, state: DashboardState, sock: socket.socket) -> None:
        """Serve `state` on `sock`, a socket already bound and listening (`ports.bind_socket`)."""
        self.state = state
        self.stopping = threading.Event()
        self.metrics = _metrics_renderer()
        super().__init__(sock.getsockname(), _Handler, bind_and_activate=False)
        self.socket.close()
        self.socket = sock
        self.server_address = sock.getsockname()
        self.port = self.server_address[1]
        self.active = 0
        self.refused = 0  # connections closed at once, past MAX_CONNECTIONS
        self._active_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        """A thread for the connection, unless MAX_CONNECTIONS are served: then it is closed."""
        with self._active_lock:
            if self.active >= MAX_CONNECTIONS:
                self.refused += 1
                self.shutdown_request(request)
                return
            self.active += 1
        try:
            super().process_request(request, client_address)
        except Exception:
            with self._active_lock:
                self.active -= 1
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._active_lock:
                self.active -= 1

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/"


def bind(state: DashboardState, port: int | None) -> DashboardServer:
    """A server on the first free port from `port` (default 8765); 0 takes any free port."""
    return DashboardServer(state, bind_socket(port))


def run_in_thread(server: DashboardServer) -> None:
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.2}, name="trainmeter-web",
        daemon=True,
    )
    thread.start()


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
