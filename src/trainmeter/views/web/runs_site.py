"""The runs page, runs side by side, and each run's dashboard: `tm runs --web`, `tm compare
A B ... --web`.

One server for a directory of runs (`.trainmeter/runs`, and any run named on the command
line): `/` lists every run with its status, cause of death and headline numbers (filter, sort,
open one, pick several to compare); `/compare?runs=A,B` overlays their curves and puts their
settings and numbers in one table; `/run/<dir>/` is one run's dashboard, the page `tm view`
serves, replayed through the same engine. Data: `/api/runs` (the rows), `/api/series/<dir>`
(the curves a comparison overlays), `/run/<dir>/api/state` and `api/events` (a run's whole
state, as `tm view` serves it).

A run is named in a URL by its directory's name, and only a name of a listed run is answered:
no path from a request reaches the file system. Replays run on a worker thread (a long log takes
seconds): the server's one loop keeps answering everyone else meanwhile, and a replay is kept
for the next request (a few runs at most). Loopback, GET and HEAD, the Host header checked:
the dashboard's server (`server.py`), with these routes added.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from ...exporters import httpd
from ...exporters.httpd import Request, Response, Stream
from ..runs_table import compared_series, run_row
from .server import DashboardServer, _static_file, page, plain
from .state import DashboardState, to_json

#: Replayed runs kept for the next request (each holds a bounded history: a few MB at most).
KEPT_REPLAYS = 6
#: Replays of different runs made at once. Each is CPU-bound Python (the GIL runs one at a
#: time anyway) holding its log's state: a comparison page asking for fifty runs' series would
#: otherwise hold fifty replays in memory together for no gain in time.
REPLAYS_AT_ONCE = 2
#: A finished run's event stream says its state once; the page is not to ask again for a day.
_ONE_MESSAGE = b"retry: 86400000\n"
_RUN_PATH = re.compile(r"/run/([^/]+)/(.*)")
_SERIES_PATH = re.compile(r"/api/series/([^/]+)")


class RunsSite:
    """The runs a server shows (re-listed at each request: a new run appears) and their
    replays, kept for the next request."""

    def __init__(self, root: Path, extra: list[Path] | None = None) -> None:
        self.root = root
        self.extra = [Path(p) for p in extra or []]
        self._kept: OrderedDict[str, tuple[bytes, bytes]] = OrderedDict()
        self._lock = threading.Lock()
        #: run name -> the lock its replay is made under: a second request for a run being
        #: replayed waits for that replay instead of starting another
        self._making: dict[str, threading.Lock] = {}
        self._at_once = threading.BoundedSemaphore(REPLAYS_AT_ONCE)

    def dirs(self) -> dict[str, Path]:
        """{directory name: path} of every run: those under the root, oldest first, then any
        named on the command line that are elsewhere."""
        from ...runlog.runs import run_dirs

        found = {p.name: p for p in run_dirs(self.root)}
        for path in self.extra:
            if path.name not in found:
                found[path.name] = path
        return found

    def listing(self) -> bytes:
        from ...runlog.runs import run_info

        rows = [run_row(run_info(path)) for path in self.dirs().values()]
        return to_json({"root": str(self.root), "runs": rows}).encode()

    def _replayed(self, name: str) -> tuple[bytes, bytes] | None:
        """(the run's whole dashboard state, its compared series), replayed once and kept.
        Requests that come while the run is being replayed wait for that one replay."""
        with self._lock:
            if name in self._kept:
                self._kept.move_to_end(name)
                return self._kept[name]
            making = self._making.setdefault(name, threading.Lock())
        with making:
            with self._lock:
                if name in self._kept:  # made while this request waited
                    self._kept.move_to_end(name)
                    return self._kept[name]
            try:
                with self._at_once:
                    return self._replay(name)
            finally:
                with self._lock:
                    self._making.pop(name, None)

    def _replay(self, name: str) -> tuple[bytes, bytes] | None:
        """Replay the run named `name` (None when it is not listed) and keep what it gives."""
        path = self.dirs().get(name)
        if path is None:
            return None
        from .replay import replay_with_history

        result, history = replay_with_history(path / "events.jsonl")
        state = DashboardState(mode="view", run_dir=str(path), history=history)
        state.on_finish(result.snapshot)
        text, _, _ = state.message()
        series = to_json({"dir": name, **compared_series(history.dump())})
        made = (text.encode(), series.encode())
        with self._lock:
            self._kept[name] = made
            while len(self._kept) > KEPT_REPLAYS:
                self._kept.popitem(last=False)
        return made

    def state(self, name: str) -> bytes | None:
        got = self._replayed(name)
        return None if got is None else got[0]

    def series(self, name: str) -> bytes | None:
        got = self._replayed(name)
        return None if got is None else got[1]


class _Later(Stream):
    """A response made on a worker thread (a replay): the loop sends it once it is ready and
    keeps serving everyone else meanwhile. The body ends with the connection."""

    def __init__(self, server: httpd.LoopServer, make: Any, ctype: str, prefix: bytes = b"") -> None:
        self.headers = {"Content-Type": ctype, "Cache-Control": "no-store",
                        "X-Content-Type-Options": "nosniff"}
        self._body: bytes | None = None
        self._sent = False
        self._prefix = prefix

        def work() -> None:
            try:
                body = make()
            except Exception as exc:  # noqa: BLE001 - one failed replay is one message, not a hung page
                body = to_json({"error": f"this run cannot be read: {exc!r}"}).encode()
            self._body = b"" if body is None else body
            server.wake()

        threading.Thread(target=work, name="trainmeter-runs", daemon=True).start()

    def next(self, now: float) -> bytes | None:
        if self._sent:
            return Stream.END
        if self._body is None:
            return None
        self._sent = True
        if not self._body:
            return Stream.END
        if self._prefix:
            return self._prefix + b"data: " + self._body + b"\n\n"
        return self._body


class RunsServer(DashboardServer):
    """The dashboard's server (loopback, GET/HEAD, Host checked) with the runs' routes."""

    def __init__(self, site: RunsSite, sock: Any) -> None:
        super().__init__(DashboardState(mode="view"), sock)
        self.site = site

    def _handle(self, request: Request) -> Response | Stream:
        if request.method not in ("GET", "HEAD") or not self._host_ok(request):
            return super()._handle(request)  # 405 or 403, as the dashboard says them
        path = request.path
        if path in ("/", "/runs", "/compare"):
            found = _static_file("runs.html")
            return page(200, found[0], found[1]) if found else plain(404, b"not found\n")
        if path == "/api/runs":
            return _Later(self, self.site.listing, "application/json")
        match = _SERIES_PATH.fullmatch(path)
        if match:
            name = unquote(match.group(1))
            if name not in self.site.dirs():
                return plain(404, b"no such run\n")
            return _Later(self, lambda: self.site.series(name), "application/json")
        match = _RUN_PATH.fullmatch(path)
        if match:
            return self._run(unquote(match.group(1)), match.group(2))
        if path.startswith("/static/"):
            return super()._handle(request)
        return plain(404, b"not found\n")

    def _run(self, name: str, rest: str) -> Response | Stream:
        """One run's dashboard: the page `tm view` serves, and its state."""
        if name not in self.site.dirs():
            return plain(404, b"no such run\n")
        if rest in ("", "index.html"):
            found = _static_file("index.html")
            return page(200, found[0], found[1]) if found else plain(404, b"not found\n")
        if rest == "api/state":
            return _Later(self, lambda: self.site.state(name), "application/json")
        if rest == "api/events":  # a finished run: its whole state, once
            return _Later(self, lambda: self.site.state(name), "text/event-stream; charset=utf-8",
                          prefix=_ONE_MESSAGE)
        return plain(404, b"not found\n")


def serve_runs(site: RunsSite, port: int | None) -> RunsServer:
    """Bind (the first free port from `port`) and serve on a daemon thread."""
    from .ports import bind_socket
    from .server import run_in_thread

    server = RunsServer(site, bind_socket(port))
    run_in_thread(server)
    return server


def compare_path(names: list[str]) -> str:
    """The comparison's address for these runs' directory names."""
    from urllib.parse import quote

    return "compare?runs=" + ",".join(quote(n, safe="") for n in names)
