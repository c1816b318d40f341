"""The dashboard's server: loopback only, read only, DNS rebinding refused, live updates."""

from __future__ import annotations

import http.client
import json
import socket
import sys
import types

import pytest

from trainmeter.views.web import server as web_server
from trainmeter.views.web.server import serve, stop
from trainmeter.views.web.state import DashboardState


@pytest.fixture
def live():
    state = DashboardState(mode="live", run_dir="/tmp/run")
    srv = serve(state, 0)
    yield state, srv
    stop(srv)


def _request(port: int, method: str = "GET", path: str = "/", host: str | None = None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    headers = {"Host": host if host is not None else f"127.0.0.1:{port}"}
    conn.request(method, path, headers=headers)
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp, body


def test_page_and_assets_are_served_with_a_strict_policy(live):
    _, srv = live
    resp, body = _request(srv.port, path="/")
    assert resp.status == 200 and b"/static/app.js" in body
    assert "default-src 'none'" in resp.getheader("Content-Security-Policy")
    assert resp.getheader("X-Frame-Options") == "DENY"
    resp, body = _request(srv.port, path="/static/vendor/uPlot.iife.min.js")
    assert resp.status == 200 and resp.getheader("Content-Type").startswith("text/javascript")
    assert b"uPlot" in body
    resp, body = _request(srv.port, path="/static/vendor/uPlot.LICENSE")
    assert resp.status == 200 and b"MIT" in body
    for bad in ("/static/../server.py", "/static/%2e%2e/server.py", "/static/.hidden", "/nope"):
        assert _request(srv.port, path=bad)[0].status == 404, bad


@pytest.mark.parametrize(
    "host", ["evil.example:{port}", "127.0.0.1:1", "localhost", "attacker.localhost:{port}", ""]
)
def test_a_foreign_host_header_is_refused(live, host):
    _, srv = live
    resp, body = _request(srv.port, path="/api/state", host=host.format(port=srv.port))
    assert resp.status == 403
    assert b"snapshot" not in body


@pytest.mark.parametrize("host", ["localhost:{port}", "127.0.0.1:{port}", "[::1]:{port}"])
def test_loopback_names_with_this_port_are_served(live, host):
    _, srv = live
    assert _request(srv.port, path="/api/state", host=host.format(port=srv.port))[0].status == 200


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "FROB"])
def test_only_get_and_head(live, method):
    _, srv = live
    resp, _ = _request(srv.port, method=method, path="/api/state")
    assert resp.status == 405
    assert resp.getheader("Allow") == "GET, HEAD"
    head, body = _request(srv.port, method="HEAD", path="/")
    assert head.status == 200 and body == b""


def _other_addresses() -> list[str]:
    """This machine's non-loopback IPv4 addresses (the ones a remote client would use)."""
    found = set()
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))  # no packet is sent: this only picks a route
            found.add(s.getsockname()[0])
    except OSError:
        pass
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET):
            found.add(info[4][0])
    except OSError:
        pass
    return sorted(a for a in found if not a.startswith("127."))


def test_nothing_listens_on_a_non_loopback_address(live):
    _, srv = live
    assert srv.server_address[0] == "127.0.0.1"
    others = _other_addresses()
    if not others:
        pytest.skip("this machine has no non-loopback address to try")
    for addr in others:
        with pytest.raises(OSError):
            socket.create_connection((addr, srv.port), timeout=2).close()


def test_ports_first_free_from_the_one_asked_and_zero_for_any():
    state = DashboardState()
    first = serve(state, 0)
    try:
        second = serve(state, first.port)  # taken: the next one up
        try:
            assert second.port > first.port
        finally:
            stop(second)
    finally:
        stop(first)


def _sse_events(port: int):
    """Yield each server-sent event's JSON from /api/events."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(f"GET /api/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
    buf = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return
            buf += chunk
            while b"\n\n" in buf:
                block, buf = buf.split(b"\n\n", 1)
                for line in block.split(b"\n"):
                    if line.startswith(b"data: "):
                        yield json.loads(line[6:])
    finally:
        sock.close()


def test_events_send_the_state_then_only_new_points(live):
    state, srv = live
    # the engine's points (`Engine.take_points`): key, step, value, seconds since the start, tokens
    state.on_points([("train_loss", step, loss, float(step), None)
                     for step, loss in ((1, 4.0), (2, 3.9), (3, 3.8))], 10.0)
    events = _sse_events(srv.port)
    first = next(events)
    assert first["mode"] == "live" and first["seq"] == 0
    assert first["history"]["series"]["train_loss"]["last"] == [4.0, 3.9, 3.8]
    state.on_points([("train_loss", 4, 3.5, 4.0, None)], 10.0)
    state.on_snapshot({"steps": 2, "tokens_per_s": 1234.0}, now=12.5)
    second = next(events)
    assert second["seq"] == 1 and second["snapshot"]["tokens_per_s"] == 1234.0
    loss = second["history"]["series"]["train_loss"]
    # from the last bucket sent on (it may have taken more points): the first two are not resent
    assert loss["reset"] is False and loss["start"] == 2 and loss["last"] == [3.8, 3.5]
    assert loss["step"] == [3, 4]
    assert second["history"]["series"]["tokens_per_s"]["last"] == [1234.0]
    state.on_snapshot({"steps": 2}, now=13.5)
    third = next(events)
    assert "train_loss" not in third["history"]["series"]  # nothing new there


def test_not_a_number_in_the_snapshot_is_sent_as_null(live):
    state, srv = live
    state.on_snapshot({"tokens_per_s": float("nan"), "x": [float("inf")]}, now=1.0)
    _, body = _request(srv.port, path="/api/state")
    snap = json.loads(body)["snapshot"]
    assert snap["tokens_per_s"] is None and snap["x"] == [None]


def test_metrics_route_only_when_the_exporter_exists(monkeypatch):
    monkeypatch.setitem(sys.modules, "trainmeter.exporters.prometheus", None)
    state = DashboardState()
    srv = serve(state, 0)
    try:
        assert _request(srv.port, path="/metrics")[0].status == 404
    finally:
        stop(srv)
    fake = types.ModuleType("trainmeter.exporters.prometheus")
    seen = {}

    def render(snap, labels):
        seen["labels"] = labels
        return b"trainmeter_steps 7\n", "text/plain; version=0.0.4"

    fake.render = render
    monkeypatch.setitem(sys.modules, "trainmeter.exporters.prometheus", fake)
    state.on_snapshot({"steps": 7, "run": {"name": "tiny"}}, now=1.0)
    srv = serve(state, 0)
    try:
        resp, body = _request(srv.port, path="/metrics")
        assert resp.status == 200 and body == b"trainmeter_steps 7\n"
        assert resp.getheader("Content-Type") == "text/plain; version=0.0.4"
        assert seen["labels"] == {"run": "tiny"}
    finally:
        stop(srv)
    assert web_server._metrics_renderer is not None
