"""`--notify`: posts to real local HTTP servers that answer 200, answer 500, or never answer."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.conftest import latest_summary, run_dirs, run_tm, tm_env
from trainmeter.views.notify import Notifier

SCRIPTS = Path(__file__).parents[1] / "integration" / "scripts"


class _Server:
    """A local endpoint answering `status` to every POST and keeping the bodies."""

    def __init__(self, status: int) -> None:
        bodies: list[dict] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length", 0))
                bodies.append(json.loads(self.rfile.read(length)))
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.bodies = bodies
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hook/T0SECRET/B0SECRET"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def silent_url():
    """A socket that accepts connections and never answers (a hung endpoint)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}/never/T0SECRET"
    sock.close()


def _snap(alerts=(), death=None) -> dict:
    snap = {"run": {"name": "tiny", "exit_status": 1}, "alerts": list(alerts), "steps": 3}
    if death:
        snap["death"] = death
    return snap


ALERT = {"kind": "memory_near_full", "key": "memory_near_full:0", "message": "rank 0: nearly full",
         "reserved_b": 77, "total_b": 80}


def test_each_alert_once_then_death_and_end_line_to_every_target(tmp_path: Path) -> None:
    a, b = _Server(200), _Server(200)
    try:
        # a generous exit wait: it ends as soon as all is sent, and a loaded machine must not
        # turn a slow post into "still sending" (the bound itself is tested below)
        n = Notifier([a.url, b.url], tmp_path, backoff=(0.05,), exit_wait_s=60.0)
        n.on_snapshot(_snap([ALERT]), 1.0)
        n.on_snapshot(_snap([ALERT]), 2.0)  # the same alert: not again
        n.on_finish(_snap([ALERT], {"text": "crashed: CUDA out of memory (rank 3)", "rank": 3}))
    finally:
        a.close()
        b.close()
    for server in (a, b):
        events = [body["event"] for body in server.bodies]
        assert events == ["alert", "death", "end"]
        alert, death, end = server.bodies
        assert alert["text"] == (
            "trainmeter [tiny]: alert: rank 0: nearly full (reserved 77 B of 80 B, 96.3%)"
        )
        assert alert["alert"]["reserved_b"] == 77
        assert death["text"] == "trainmeter [tiny]: died: crashed: CUDA out of memory (rank 3)"
        assert death["death"]["rank"] == 3
        assert end["text"].startswith("trainmeter: crashed: CUDA out of memory (rank 3); ")
    assert (n.sent, n.failed) == (6, 0)
    assert json.loads((tmp_path / "notify.json").read_text())["sent"] == 6


def test_a_failing_endpoint_is_retried_then_counted_without_its_url(tmp_path: Path) -> None:
    bad = _Server(500)
    logged: list[dict] = []
    warned: list[str] = []
    try:
        n = Notifier(
            [bad.url], tmp_path, lambda k, m: warned.append(m), backoff=(0.05, 0.1),
            exit_wait_s=60.0,  # ends once the retries are done; slow ones are not cut short
        )
        n.log_fact = logged.append
        n.on_snapshot(_snap([ALERT]), 1.0)
        deadline = time.monotonic() + 60
        while n.failed == 0:
            assert time.monotonic() < deadline, "the alert's three attempts never ended"
            time.sleep(0.02)
        n.on_snapshot(_snap([ALERT]), 2.0)  # the live loop's next tick logs the count
        n.on_finish(_snap())
    finally:
        bad.close()
    assert len(bad.bodies) == 3 + 3  # the alert and the end line, each tried 1 + 2 times
    assert n.failed == 2 and n.reasons == {"HTTP 500": 2}
    assert logged[0]["key"] == "notify_failures" and logged[0]["value"] == 1
    assert warned == ["--notify: 2 post(s) failed: HTTP 500 (2)"]
    assert "SECRET" not in json.dumps(logged) + (tmp_path / "notify.json").read_text()


def test_a_hanging_endpoint_never_holds_tm_more_than_the_exit_wait(
    tmp_path, silent_url, monkeypatch
) -> None:
    from trainmeter.views import notify

    # each attempt may hang 60 s: a tm that waited for the hung post would wait that long
    monkeypatch.setattr(notify, "ATTEMPT_TIMEOUT_S", 60.0)
    n = Notifier([silent_url], tmp_path, backoff=(0.05,), exit_wait_s=1.0)
    n.on_snapshot(_snap([ALERT]), 1.0)  # the sender is now stuck in a post
    t0 = time.monotonic()
    n.on_finish(_snap())
    waited = time.monotonic() - t0
    # the exit wait is 1 s; waiting for the hung post would take 60 s: the rest of the bound
    # is slack for a loaded machine
    assert waited < 20.0
    assert n.sent == 0 and n.failed == 2


@pytest.mark.parametrize("outcome", ["fails", "succeeds"])
def test_a_post_that_ends_after_the_exit_wait_is_not_counted_twice(
    tmp_path: Path, outcome: str
) -> None:
    """close() counts the post in flight as failed; when that post ends later (its timeout, on
    a loaded machine a moment after), the counts must stay what was reported."""
    release, entered = threading.Event(), threading.Event()

    def post(url: str, data: bytes, timeout: float) -> None:
        entered.set()
        assert release.wait(60)
        if outcome == "fails":
            raise TimeoutError("timed out")

    before = set(threading.enumerate())
    n = Notifier(["http://hook/T0SECRET"], tmp_path, post=post, backoff=(), exit_wait_s=0.2)
    (sender,) = set(threading.enumerate()) - before  # its one target's thread
    n.on_snapshot(_snap([ALERT]), 1.0)
    assert entered.wait(60)  # the alert's post is in flight
    n.on_finish(_snap())
    assert (n.sent, n.failed) == (0, 2)
    assert n.reasons == {"still sending when tm ended": 2}
    release.set()
    sender.join(60)
    assert not sender.is_alive()
    assert (n.sent, n.failed) == (0, 2)  # as notify.json says
    assert n.reasons == {"still sending when tm ended": 2}
    assert json.loads((tmp_path / "notify.json").read_text())["failed"] == 2


@pytest.mark.slow
def test_tm_notify_posts_the_death_and_never_records_the_url(tmp_path: Path, silent_url) -> None:
    good = _Server(200)
    try:
        ours = run_tm(["--no-web", "--notify", good.url, "--notify", silent_url,
                       str(SCRIPTS / "dies.py"), "oom"], tmp_path, env=tm_env(OMP_NUM_THREADS="1"))
    finally:
        good.close()
    assert ours.returncode == 1
    assert [b["event"] for b in good.bodies] == ["death", "end"]
    assert good.bodies[0]["text"] == "trainmeter [dies]: died: crashed: CUDA out of memory"
    run_dir = run_dirs(tmp_path)[-1]
    left = json.loads((run_dir / "notify.json").read_text())
    assert left["sent"] == 2 and left["failed"] == 2  # the hung endpoint's two posts
    everything = ours.stdout + ours.stderr + "".join(
        p.read_text(errors="replace") for p in run_dir.iterdir() if p.is_file()
    )
    assert "SECRET" not in everything and str(good.httpd.server_address[1]) not in everything
    assert latest_summary(tmp_path)["death"]["cause"] == "exception"


def test_a_notify_url_on_a_recorded_command_line_is_redacted() -> None:
    from trainmeter.redact import REDACTED, redact_argv

    assert redact_argv(["tm", "--notify", "https://hooks.example/T0SECRET", "train.py"]) == [
        "tm", "--notify", REDACTED, "train.py",
    ]
    assert redact_argv(["python", "train.py", "--webhook=https://h/T0SECRET"]) == [
        "python", "train.py", f"--webhook={REDACTED}",
    ]
