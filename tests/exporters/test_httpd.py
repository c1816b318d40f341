"""The event loop behind the dashboard and `--metrics-addr`: HTTP/1.1 as browsers and scrapers
speak it, and bounds on what a client may hold (size, time, place in the table)."""

from __future__ import annotations

import socket
import time

import pytest

from trainmeter.exporters import httpd


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setattr(httpd, "REQUEST_TIMEOUT_S", 0.5)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    seen: list[httpd.Request] = []

    def handle(request: httpd.Request) -> httpd.Response:
        seen.append(request)
        return httpd.Response(200, f"you asked {request.path}\n".encode())

    srv = httpd.LoopServer(sock, handle, max_connections=8)
    httpd.serve_in_thread(srv, "test-httpd", poll_interval=0.05)
    srv.seen = seen  # type: ignore[attr-defined]
    yield srv
    srv.shutdown()
    srv.server_close()


def _talk(port: int, data: bytes, wait: float = 2.0) -> bytes:
    sock = socket.create_connection(("127.0.0.1", port), timeout=wait)
    sock.sendall(data)
    got = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            got += chunk
    except TimeoutError:
        pass
    sock.close()
    return got


def test_requests_sent_ahead_are_answered_in_order_on_one_connection(server) -> None:
    got = _talk(server.port, b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nHEAD /b HTTP/1.1\r\nHost: x\r\n\r\n"
                b"GET /c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert got.count(b"HTTP/1.1 200 OK") == 3
    assert got.index(b"you asked /a") < got.index(b"you asked /c")
    assert b"you asked /b" not in got  # HEAD: the length, not the body
    assert [r.path for r in server.seen] == ["/a", "/b", "/c"]


def test_http_1_0_closes_after_its_answer(server) -> None:
    got = _talk(server.port, b"GET /old HTTP/1.0\r\n\r\n", wait=5)
    assert got.startswith(b"HTTP/1.1 200 OK") and got.endswith(b"you asked /old\n")


def test_a_head_that_never_ends_is_cut_at_its_size(server) -> None:
    got = _talk(server.port, b"GET / HTTP/1.1\r\nX: " + b"a" * (httpd.MAX_HEAD + 10))
    assert got.startswith(b"HTTP/1.1 431 ")


def test_a_head_dribbled_a_byte_at_a_time_runs_out_of_time(server) -> None:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    start = time.monotonic()
    closed = False
    for byte in b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"y" * 100:
        try:
            sock.sendall(bytes([byte]))
        except OSError:
            closed = True
            break
        time.sleep(0.05)
        if time.monotonic() - start > 3:
            break
    if not closed:
        sock.settimeout(3)
        closed = sock.recv(100) == b""
    sock.close()
    assert closed and time.monotonic() - start < 3  # 0.5 s allowed here, however it dribbles
    assert server.timed_out >= 1


@pytest.mark.parametrize(
    "head",
    [b"GARBAGE\r\n\r\n", b"GET / HTTP/2.0\r\n\r\n", b"GET / HTTP/1.1\r\n folded: x\r\n\r\n",
     b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", b"GET / HTTP/1.1\r\nBad Name: x\r\n\r\n"],
)
def test_what_is_not_http_1_is_a_400_and_a_close(server, head) -> None:
    got = _talk(server.port, head)
    assert got.startswith(b"HTTP/1.1 400 ") and b"Connection: close" in got


def test_a_request_with_a_body_is_answered_and_its_body_never_read(server) -> None:
    got = _talk(server.port, b"GET /x HTTP/1.1\r\nContent-Length: 5\r\n\r\nGET /y HTTP/1.1\r\n\r\n")
    assert got.count(b"HTTP/1.1 200") == 1 and b"Connection: close" in got
    assert [r.path for r in server.seen] == ["/x"]  # the "body" was not taken for a request


def test_a_full_table_makes_room_for_a_request_sent_at_once(server) -> None:
    idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(50)]
    try:
        got = _talk(server.port, b"GET /me HTTP/1.1\r\nConnection: close\r\n\r\n")
        assert b"you asked /me" in got
        assert server.active <= 8 and server.evicted >= 42
    finally:
        for sock in idle:
            sock.close()


def test_a_newcomer_to_a_full_table_takes_one_place_not_two(server, monkeypatch) -> None:
    """The accept loop made room before each try, so the try that found nobody waiting had
    closed a connection for no one: every newcomer cost two clients their place."""
    monkeypatch.setattr(httpd, "REQUEST_TIMEOUT_S", 30.0)  # idle ones stay, however loaded
    held = []
    try:
        for i in range(9):  # the table holds 8
            held.append(socket.create_connection(("127.0.0.1", server.port)))
            deadline = time.monotonic() + 5
            while server.active + server.evicted < i + 1 and time.monotonic() < deadline:
                time.sleep(0.01)
        time.sleep(0.2)  # a few more turns of the loop
        assert (server.active, server.evicted) == (8, 1)
    finally:
        for sock in held:
            sock.close()


def test_the_date_header_is_what_email_utils_formats():
    """`http_date` is `email.utils.formatdate(usegmt=True)` (written out so a server's start
    does not import `email`): each month and weekday, the epoch, leap days, the present."""
    from email.utils import formatdate

    from trainmeter.exporters.httpd import http_date

    moments = [0.0, 951782400.0, 1709164799.999, 4102444800.0, time.time()]
    moments += [1767225600.0 + day * 86400 + day * 3671.5 for day in range(0, 400, 3)]
    for now in moments:
        assert http_date(now) == formatdate(now, usegmt=True), now
    assert len(http_date()) == 29 and http_date().endswith(" GMT")
