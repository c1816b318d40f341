"""`--notify URL`: each new alert, the cause of death and the end-of-run line, posted as JSON.

The body is `{"text": ..., "event": "alert"|"death"|"end", "run": name, ...the structured
fields}`: `text` is what a Slack-compatible incoming webhook shows, the rest is for a program.

Why it is built like this:

- Posted by `tm`, never by the training process: the notifier is one of `tm`'s live views.
- One daemon thread a target sends (a hung endpoint holds only its own posts); the live loop
  only appends to a queue. A failed post (an error
  status, a refused connection, a timeout) is retried with back-off (BACKOFF_S), each attempt
  bounded by ATTEMPT_TIMEOUT_S; so a slow, failing or hanging endpoint never delays the run.
- At the end `tm` waits for the queue at most EXIT_WAIT_S in all, counted from the training
  command's end, then leaves: what is left is counted as failed, never waited for. Each attempt
  is over in ATTEMPT_TIMEOUT_S whatever the endpoint does (one that drips its answer a byte at
  a time is cut).
- `https://user:pw@host/...` posts with the user and password as Basic authorization (they are
  never part of what is connected to, shown or recorded).
- Each failure is counted: in the log as the fact `notify_failures` while the run lives, then in
  `notify.json` in the run directory, and once on stderr.
- A webhook URL is a secret (whoever has it may post): it is never recorded, never shown, not
  even in an error; targets are named by their position (`--notify` #1, #2...).
"""

from __future__ import annotations

import collections
import functools
import http.client
import io
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from ..snapread import get_dict

ATTEMPT_TIMEOUT_S = 2.0
BACKOFF_S = (0.5, 1.0, 2.0, 4.0)  # waits before the 2nd, 3rd, 4th and 5th attempt
EXIT_WAIT_S = 2.0
MAX_QUEUE = 1000


class Notifier:
    """A live view (`on_snapshot`, `on_finish`) that posts to every `--notify` URL."""

    name = "notify"

    def __init__(
        self,
        urls: list[str],
        run_dir: Path | None = None,
        warn: Any = None,
        *,
        post: Any = None,
        backoff: tuple[float, ...] = BACKOFF_S,
        exit_wait_s: float = EXIT_WAIT_S,
    ) -> None:
        self._urls = list(urls)
        self.run_dir = run_dir
        self.warn = warn
        self.post = post or _post
        self.backoff = backoff
        self.exit_wait_s = exit_wait_s
        self.sent = 0
        self.failed = 0
        self.reasons: collections.Counter[str] = collections.Counter()
        self.log_fact: Any = None  # set by the supervisor: writes a `fact` record while the run lives
        #: set by the supervisor: when the training command ended (monotonic), from which the
        #: wait at the end is counted (tm's exit is held no more than `exit_wait_s` after it)
        self.ended_at: float | None = None
        self._logged_failures = 0
        self._seen: set[tuple[Any, Any]] = set()
        self._queues: list[collections.deque[dict[str, Any]]] = [
            collections.deque() for _ in self._urls
        ]
        self._wakes = [threading.Event() for _ in self._urls]
        self._deadline: float | None = None  # set by close(): no attempt starts after it
        self._busy = 0
        self._closed = False  # close() has counted what was left: the counts are final
        self._lock = threading.Lock()
        for target in range(len(self._urls)):
            threading.Thread(
                target=self._run, args=(target,), name=f"trainmeter-notify-{target + 1}", daemon=True
            ).start()

    def __repr__(self) -> str:  # never the URLs
        return f"Notifier({len(self._urls)} target(s))"

    # ---- what is posted -----------------------------------------------------------------

    def on_snapshot(self, snap: dict[str, Any], now: float) -> None:
        for alert in snap.get("alerts") or []:
            if not isinstance(alert, dict):
                continue
            key = (alert.get("kind"), alert.get("message"))
            if key in self._seen:
                continue
            self._seen.add(key)
            from .memory_text import alert_numbers

            text = f"alert: {alert.get('message')}{alert_numbers(alert)}"
            self.put(_body("alert", snap, text, alert=alert))
        self._log_failures()

    def on_finish(self, snap: dict[str, Any]) -> None:
        """The alerts not yet posted, the cause of death, the end line; then a bounded wait."""
        self.on_snapshot(snap, 0.0)
        death = get_dict(snap, "death")
        if death and death.get("text"):
            self.put(_body("death", snap, f"died: {death['text']}", death=death))
        from .terminal import summary_line

        line = summary_line(snap, self.run_dir)
        self.put(_body("end", snap, line, run_end=_dict(snap.get("run"))))
        self.close(self.exit_wait_s)

    def put(self, body: dict[str, Any]) -> None:
        with self._lock:
            for target, queue in enumerate(self._queues):
                if len(queue) >= MAX_QUEUE:
                    self._fail("queue full")
                    continue
                queue.append(body)
                self._wakes[target].set()

    # ---- the sending thread -------------------------------------------------------------

    def _run(self, target: int) -> None:
        queue, wake = self._queues[target], self._wakes[target]
        while True:
            wake.wait()
            with self._lock:
                if not queue:
                    wake.clear()
                    if self._deadline is not None:
                        return
                    continue
                body = queue.popleft()
                self._busy += 1
            try:
                self._deliver(target, body)
            finally:
                with self._lock:
                    self._busy -= 1

    def _deliver(self, target: int, body: dict[str, Any]) -> None:
        data = json.dumps(body, allow_nan=False, default=str).encode("utf-8")
        reason = "not sent"
        for attempt in range(len(self.backoff) + 1):
            if attempt:
                pause = self.backoff[attempt - 1]
                if self._deadline is not None and time.monotonic() + pause >= self._deadline:
                    break  # tm is leaving: no attempt that could not finish in time
                time.sleep(pause)
            try:
                self.post(self._urls[target], data, ATTEMPT_TIMEOUT_S)
                with self._lock:
                    if not self._closed:  # else close() counted it already, as still sending
                        self.sent += 1
                return
            except Exception as exc:  # noqa: BLE001 - an endpoint's failure is counted, never raised
                reason = _reason(exc)
        with self._lock:
            if not self._closed:
                self._fail(reason)

    def _fail(self, reason: str) -> None:
        self.failed += 1
        self.reasons[reason] += 1

    def _log_failures(self) -> None:
        if self.log_fact is None or self.failed == self._logged_failures:
            return
        self._logged_failures = self.failed
        self.log_fact({
            "key": "notify_failures", "value": self.failed, "source": "measured",
            "note": "posts to --notify that failed after their retries: "
            + ", ".join(f"{r} ({n})" for r, n in sorted(self.reasons.items())),
        })

    # ---- the end ------------------------------------------------------------------------

    def close(self, wait_s: float) -> None:
        """Wait at most `wait_s` for the queue (from the run's end when `ended_at` is known);
        what is left counts as failed; then report."""
        deadline = time.monotonic() + wait_s
        if self.ended_at is not None:
            deadline = min(deadline, self.ended_at + wait_s)
        self._deadline = deadline
        for wake in self._wakes:
            wake.set()
        while time.monotonic() < deadline:
            with self._lock:
                if not any(self._queues) and not self._busy:
                    break
            time.sleep(0.01)
        with self._lock:
            left = sum(len(q) for q in self._queues) + self._busy
            for queue in self._queues:
                queue.clear()
            for _ in range(left):
                self._fail("still sending when tm ended")
            # A post still in flight was just counted as failed: when it ends later, its
            # outcome must not be counted a second time (the reported counts are final).
            self._closed = True
        self._report()

    def _report(self) -> None:
        summary = {"targets": len(self._urls), "sent": self.sent, "failed": self.failed,
                   "reasons": dict(self.reasons)}
        if self.run_dir is not None:
            try:
                from ..runlog.rundir import write_file

                write_file(Path(self.run_dir), "notify.json", json.dumps(summary, indent=2))
            except OSError:
                pass
        if self.failed and self.warn is not None:
            reasons = ", ".join(f"{r} ({n})" for r, n in sorted(self.reasons.items()))
            self.warn("notify", f"--notify: {self.failed} post(s) failed: {reasons}")


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _body(event: str, snap: dict[str, Any], text: str, **fields: Any) -> dict[str, Any]:
    run = _dict(snap.get("run"))
    name = run.get("name") or "run"
    prefix = "" if text.startswith("trainmeter:") else f"trainmeter [{name}]: "
    return {"text": prefix + text, "event": event, "run": name, **fields}


def _reason(exc: BaseException) -> str:
    """Why a post failed, without the URL."""
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code}"
    if isinstance(exc, (TimeoutError, OSError)) and "timed out" in str(exc).lower():
        return "timed out"
    if isinstance(exc, urllib.error.URLError):
        inner = exc.reason
        if isinstance(inner, TimeoutError) or "timed out" in str(inner).lower():
            return "timed out"
        return f"cannot connect ({type(inner).__name__})"
    return type(exc).__name__


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A webhook answers where it is: a redirect is a failed post (`HTTP 302`), never a post,
    or its credentials, sent on to another address."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> None:
        return None


class _DeadlineReader(io.RawIOBase):
    """The socket's reading end, each read given only the time left before `deadline`: a
    per-read timeout alone lets an endpoint that sends its status line and headers a byte at a
    time hold the attempt for ever (http.client reads them before any of our code runs)."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        super().__init__()
        self._sock = sock
        self._raw = sock.makefile("rb", buffering=0)  # counted by the socket, closed with it
        self._deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("timed out")
        self._sock.settimeout(left)
        return self._raw.readinto(buffer)

    def close(self) -> None:
        self._raw.close()
        super().close()


class _DeadlineSocket:
    """A connected socket whose reads and writes all end by one deadline (everything else
    is the socket's own)."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self._sock = sock
        self._deadline = deadline

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)

    def _left(self) -> float:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("timed out")
        return left

    def sendall(self, data: Any, *args: Any) -> None:
        self._sock.settimeout(self._left())
        self._sock.sendall(data, *args)

    def makefile(self, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if "w" in mode:
            return self._sock.makefile(mode, *args, **kwargs)
        return io.BufferedReader(_DeadlineReader(self._sock, self._deadline))


def _with_deadline(base: type) -> type:
    """`base` (HTTPConnection or HTTPSConnection) whose socket, once connected (and wrapped in
    TLS), ends every read and write by the attempt's deadline."""

    class Connection(base):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, deadline: float, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._deadline = deadline

        def connect(self) -> None:
            self.timeout = max(0.001, self._deadline - time.monotonic())
            super().connect()
            self.sock = _DeadlineSocket(self.sock, self._deadline)

    return Connection


_HTTP = _with_deadline(http.client.HTTPConnection)
_HTTPS = _with_deadline(http.client.HTTPSConnection)


class _DeadlineHTTP(urllib.request.HTTPHandler):
    def __init__(self, deadline: float) -> None:
        super().__init__()
        self.deadline = deadline

    def http_open(self, req: Any) -> Any:
        return self.do_open(functools.partial(_HTTP, deadline=self.deadline), req)


class _DeadlineHTTPS(urllib.request.HTTPSHandler):
    def __init__(self, deadline: float) -> None:
        super().__init__()
        self.deadline = deadline

    def https_open(self, req: Any) -> Any:
        return self.do_open(functools.partial(_HTTPS, deadline=self.deadline), req,
                            context=self._context)


def _opener(deadline: float) -> Any:
    """An opener for one attempt: no redirects, and every socket read and write by `deadline`."""
    return urllib.request.build_opener(_NoRedirect(), _DeadlineHTTP(deadline), _DeadlineHTTPS(deadline))


def split_credentials(url: str) -> tuple[str, dict[str, str]]:
    """`https://user:pw@host/x` as (`https://host/x`, its Basic `Authorization` header): the
    user info of a URL is a credential to send as one, not a host name to connect to."""
    import base64
    from urllib.parse import unquote, urlsplit, urlunsplit

    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, {}
    userinfo, _, host = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    token = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode("ascii")
    return urlunsplit(parts._replace(netloc=host)), {"Authorization": f"Basic {token}"}


def _post(url: str, data: bytes, timeout: float) -> None:
    """One POST, over in `timeout` seconds whatever the endpoint does: every read and write of
    the exchange (the status line and headers that http.client reads, then the answer) gets only
    the time left of one deadline, so an endpoint dripping any of it a byte at a time is cut."""
    target, auth = split_credentials(url)
    request = urllib.request.Request(
        target, data=data, method="POST", headers={"Content-Type": "application/json"}
    )
    for name, value in auth.items():  # never passed on to wherever a redirect points
        request.add_unredirected_header(name, value)
    deadline = time.monotonic() + timeout
    with _opener(deadline).open(request, timeout=timeout) as response:
        got = 0
        while got < 1024:
            chunk = response.read1(1024 - got)
            if not chunk:
                return
            got += len(chunk)
