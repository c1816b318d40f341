"""The dashboard as a live view: registered behind --port/--no-web, in `tm` and `tm attach`."""

from __future__ import annotations

import io
import json
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from trainmeter.supervisor.options import RunOptions
from trainmeter.views.observers import make_observers

from ..conftest import run_tm, tm_env

URL = re.compile(r"dashboard (http://127\.0\.0\.1:(\d+)/)")


def _get(url: str) -> dict:
    with urllib.request.urlopen(url + "api/state", timeout=10) as resp:
        return json.loads(resp.read())


def _warnings():
    seen = []
    return seen, lambda key, msg: seen.append((key, msg))


def test_registered_behind_its_options_and_fed_by_the_supervisor(tmp_path: Path) -> None:
    opts = RunOptions()
    opts.web, opts.port = False, 0
    seen, warn = _warnings()
    assert [o for o in make_observers(opts, tmp_path, warn) if o.name == "web"] == []
    opts.web = True
    err = io.StringIO()
    [web] = [o for o in make_observers(opts, tmp_path, warn, err) if o.name == "web"]
    try:
        assert err.getvalue() == f"trainmeter: dashboard {web.url}\n"  # once, at the start
        web.on_points([("train_loss", 0, 2.5, 1.0, None)], 5.0)  # the engine's points
        web.on_snapshot({"steps": 1, "tokens_per_s": 10.0, "run": {"name": "x"}}, 6.5)
        state = _get(web.url)
        assert state["snapshot"]["tokens_per_s"] == 10.0 and state["finished"] is False
        assert state["history"]["series"]["train_loss"]["last"] == [2.5]
        assert state["run_dir"] == str(tmp_path)
        web.on_finish({"steps": 1, "tokens_per_s": 9.0})
        state = _get(web.url)
        assert state["finished"] is True and state["snapshot"]["tokens_per_s"] == 9.0
    finally:
        web.close()
    assert seen == []


def test_quiet_serves_without_a_line(tmp_path: Path) -> None:
    opts = RunOptions()
    opts.port, opts.quiet = 0, True
    err = io.StringIO()
    [web] = [o for o in make_observers(opts, tmp_path, lambda *a: None, err) if o.name == "web"]
    try:
        assert err.getvalue() == "" and _get(web.url)["mode"] == "live"
    finally:
        web.close()


def test_tm_prints_the_url_once_and_no_web_turns_it_off(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text("print('hi')\n")
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    taken = busy.getsockname()[1]
    try:
        result = run_tm(["--no-agent", "--port", str(taken), "t.py"], tmp_path)
    finally:
        busy.close()
    assert result.returncode == 0, result.stderr
    lines = [m for m in map(URL.search, result.stderr.splitlines()) if m]
    assert len(lines) == 1
    assert int(lines[0].group(2)) > taken  # the asked port was taken: the next free one
    assert result.stderr.splitlines()[0].startswith("trainmeter: dashboard ")
    off = run_tm(["--no-agent", "--no-web", "t.py"], tmp_path)
    assert off.returncode == 0 and "dashboard" not in off.stderr


def test_tm_attach_serves_the_page_and_takes_the_same_flags(tmp_path: Path) -> None:
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        off = subprocess.run(
            [sys.executable, "-m", "trainmeter", "attach", str(target.pid), "--no-web", "-q",
             "--interval", "0.2", "--duration", "0.1"],
            cwd=tmp_path, env=tm_env(), capture_output=True, text=True, timeout=60,
        )
        assert off.returncode == 0, off.stderr
        assert "watching pid" in off.stderr and "dashboard" not in off.stderr
        attach = subprocess.Popen(
            [sys.executable, "-m", "trainmeter", "attach", str(target.pid), "--interval", "0.3",
             "--duration", "30", "-q", "--port", "0"],
            cwd=tmp_path, env=tm_env(), stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
            text=True,
        )
        try:
            match = None
            for line in attach.stderr:
                match = URL.search(line)
                if match:
                    break
            assert match, "no dashboard line"
            deadline = time.monotonic() + 30
            while True:
                state = _get(match.group(1))
                if state["seq"] >= 2 and "host" in state["snapshot"]:
                    break
                assert time.monotonic() < deadline, state
                time.sleep(0.2)
            assert state["history"]["series"]["host_rss_b"]["last"][-1] > 0
            assert "tokens_per_s" in state["snapshot"]["absent"]  # observe-only: said why
        finally:
            attach.terminate()
            attach.wait(timeout=30)
    finally:
        target.kill()
        target.wait()
