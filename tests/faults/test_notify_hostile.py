"""`--notify` with credentials in its URL, and endpoints that drip (issue 29, item 10).

Before, `https://user:pw@host/hook` never delivered (urllib took `user:pw@host` for the host and
could not connect), and a webhook that dripped its answer a byte every half second held `tm`'s
exit past the 2 s the README promises (3.3 s measured after a run whose end took a second: the
wait was counted from when the notifier was told, not from the run's end). Now the user info is
sent as Basic authorization and never shown, the wait is counted from the command's end, and an
answer's body is read for at most the attempt's time.
"""

from __future__ import annotations

import base64
import socket
import threading
import time
from pathlib import Path

from trainmeter.views import notify
from trainmeter.views.notify import Notifier

SNAP = {"run": {"name": "tiny", "exit_status": 0}, "steps": 3}


class _Endpoint:
    """A raw local HTTP endpoint: keeps each request, answers with `head`, then drips `body` a
    byte every `drip_s`."""

    def __init__(self, head: bytes, body: bytes = b"", drip_s: float = 0.0) -> None:
        self.requests: list[bytes] = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.head, self.body, self.drip_s = head, body, drip_s
        self.closed = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.closed.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(5)
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, rest = data.partition(b"\r\n\r\n")
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length")), 0)
            while len(rest) < length:
                rest += conn.recv(65536)
            self.requests.append(head + b"\r\n\r\n" + rest)
            conn.sendall(self.head)
            for byte in self.body:
                if self.closed.is_set():
                    break
                conn.sendall(bytes([byte]))
                time.sleep(self.drip_s)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self.closed.set()
        self.sock.close()


def test_user_and_password_in_the_url_are_sent_as_basic_authorization(tmp_path: Path) -> None:
    endpoint = _Endpoint(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    try:
        url = f"http://hook%40me:S3cr%3At@127.0.0.1:{endpoint.port}/services/T0/B0"
        n = Notifier([url], tmp_path, backoff=(0.05,), exit_wait_s=30.0)
        n.on_finish(SNAP)
    finally:
        endpoint.close()
    assert n.sent == 1 and n.failed == 0  # the end line, delivered
    [first, *_] = endpoint.requests
    expected = base64.b64encode(b"hook@me:S3cr:t").decode()
    assert f"Authorization: Basic {expected}".encode() in first
    assert f"Host: 127.0.0.1:{endpoint.port}".encode() in first
    assert b"S3cr" not in first.split(b"\r\n\r\n", 1)[1]  # not in the body
    assert "S3cr" not in (tmp_path / "notify.json").read_text() and "S3cr" not in repr(n)


def test_a_dripping_answer_is_cut_at_the_attempts_time() -> None:
    endpoint = _Endpoint(b"HTTP/1.1 200 OK\r\nContent-Length: 200\r\n\r\n", b"x" * 200, 0.5)
    try:
        start = time.monotonic()
        try:
            notify._post(f"http://127.0.0.1:{endpoint.port}/hook", b"{}", 1.0)
        except OSError:
            pass  # cut: counted as a failed attempt by the notifier
        took = time.monotonic() - start
    finally:
        endpoint.close()
    assert took < 2.0  # 200 bytes dripped would take 100 s


def test_a_status_line_and_headers_dripped_a_byte_at_a_time_are_cut_at_the_attempts_time() -> None:
    # http.client reads the status line and headers itself, each read with the socket's
    # timeout: a byte every 0.2 s never trips a per-read timeout of 1 s, and these 60 bytes
    # would hold the attempt (and its sending thread) 12 s.
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Slow: dripdripdrip\r\n\r\nok"
    endpoint = _Endpoint(b"", head, 0.2)
    try:
        start = time.monotonic()
        try:
            notify._post(f"http://127.0.0.1:{endpoint.port}/hook", b"{}", 1.0)
            error: BaseException | None = None
        except OSError as exc:
            error = exc
        took = time.monotonic() - start
    finally:
        endpoint.close()
    assert error is not None and notify._reason(error) == "timed out"  # a failed attempt
    assert 0.9 <= took < 1.3, took  # given up at the attempt's deadline, not at the headers' end
    assert len(endpoint.requests) == 1  # it did reach the endpoint: the cut is in the answer


def test_the_wait_at_the_end_counts_from_the_runs_end(tmp_path: Path) -> None:
    """The run's end took 1.5 s already (a long log's summary): the notifier holds tm's exit
    only what is left of its 2 s, not 2 s more."""
    endpoint = _Endpoint(b"HTTP/1.1 200 OK\r\nContent-Length: 200\r\n\r\n", b"x" * 200, 0.5)
    try:
        n = Notifier([f"http://127.0.0.1:{endpoint.port}/hook"], tmp_path, exit_wait_s=2.0)
        n.ended_at = time.monotonic() - 1.5
        start = time.monotonic()
        n.on_finish(SNAP)
        held = time.monotonic() - start
    finally:
        endpoint.close()
    assert held < 1.0, held
    assert n.failed >= 1 and "still sending when tm ended" in n.reasons


def test_a_redirect_is_a_failed_post_and_the_credentials_stay(tmp_path: Path) -> None:
    """A webhook that answers 302 to another address: nothing, and no credential, goes there."""
    elsewhere = _Endpoint(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    moved = _Endpoint(f"HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:{elsewhere.port}/x\r\n"
                      "Content-Length: 0\r\n\r\n".encode())
    try:
        n = Notifier([f"http://u:S3cret@127.0.0.1:{moved.port}/hook"], tmp_path, backoff=(),
                     exit_wait_s=30.0)
        n.on_finish(SNAP)
    finally:
        moved.close()
        elsewhere.close()
    assert len(moved.requests) == 1 and elsewhere.requests == []
    assert n.sent == 0 and n.reasons == {"HTTP 302": 1}
