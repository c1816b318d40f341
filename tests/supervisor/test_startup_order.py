"""What `tm` does before the child starts adds to every run's start-up, so the child starts right
after the socket is bound; the run directory and the first records are made while it boots.
These tests pin the order, what a setup that fails after the start leaves, and that the log
still opens with `run.start` when the agent speaks at once."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from trainmeter.cli.args import parse_run_args
from trainmeter.supervisor import session as session_mod

from ..conftest import read_events, run_dirs, run_tm
from .procs import write_script


def test_the_child_starts_before_the_run_directory_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write_script(tmp_path / "t.py", "import sys; sys.exit(4)")
    order: list[str] = []
    real_start, real_prepare = session_mod.Launcher.start, session_mod.Session.prepare

    def start(self):  # type: ignore[no-untyped-def]
        order.append("child")
        return real_start(self)

    def prepare(self):  # type: ignore[no-untyped-def]
        order.append("run directory" if not run_dirs(tmp_path) else "already there")
        real_prepare(self)

    monkeypatch.setattr(session_mod.Launcher, "start", start)
    monkeypatch.setattr(session_mod.Session, "prepare", prepare)
    opts = parse_run_args(["-q", "t.py"])
    status = session_mod.supervise(opts, samplers_factory=lambda pid, run_dir: [], watcher=object())
    assert status == 4
    assert order == ["child", "run directory"]
    (run_dir,) = run_dirs(tmp_path)
    events = read_events(run_dir)
    assert events[0]["kind"] == "run.start" and events[-1]["kind"] == "run.end"
    assert any(e["kind"] == "hello" for e in events)  # the agent's first words were kept


def test_a_setup_that_fails_after_the_start_leaves_the_child_running_unwatched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out.txt"
    # the child outlives tm's setup and says whether its socket was closed while it ran: it
    # waits for that (tm's setup may be slow on a loaded machine), up to a bound it never
    # reaches when tm closes the socket, and tm waits for the child
    write_script(
        tmp_path / "t.py",
        "import os, sys, time\n"
        "deadline = time.monotonic() + 60\n"
        "while os.path.exists(os.environ['TRAINMETER_SOCKET']) and time.monotonic() < deadline:\n"
        "    time.sleep(0.02)\n"
        f"open({str(out)!r}, 'w').write(str(os.path.exists(os.environ['TRAINMETER_SOCKET'])))\n"
        "sys.exit(5)\n",
    )
    from trainmeter.runlog import store

    def broken(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("no room here")

    monkeypatch.setattr(store.RunStore, "create", broken)
    opts = parse_run_args(["-q", "t.py"])
    status = session_mod.supervise(opts, samplers_factory=lambda pid, run_dir: [], watcher=object())
    assert status == 5  # the child's status, whatever failed in tm
    assert out.read_text() == "False"  # the socket was closed: its agent hears nobody listens
    err = capsys.readouterr().err
    assert "setup failed (RuntimeError('no room here'))" in err
    assert "runs unwatched" in err
    assert "summary failed" not in err  # nothing was recorded: nothing to sum up, no second warning
    assert not run_dirs(tmp_path)


def test_run_start_opens_the_log_though_the_agent_speaks_at_once(tmp_path: Path) -> None:
    # a script that emits right away: its records wait in the socket until tm has written
    # run.start and the declared facts
    write_script(
        tmp_path / "t.py", "from trainmeter import emit\nfor i in range(50):\n    emit(x=i)\n"
    )
    result = run_tm(["-q", "--no-web", "--budget-tokens", "1M", "t.py"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    events = read_events(run_dirs(tmp_path)[0])
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "run.start"
    first_agent = next(i for i, e in enumerate(events) if e["src"] != "tm")
    assert all(e["src"] == "tm" for e in events[:first_agent])
    declared = [e for e in events[:first_agent] if e["kind"] == "fact"]
    assert declared and declared[0]["d"]["source"] == "declared"
    values = [e["d"]["value"] for e in events if e["kind"] == "metric" and e["d"]["key"] == "x"]
    assert values == [float(i) for i in range(50)]


@pytest.mark.parametrize("with_thread", [False, True])
def test_tm_leaves_without_teardown_only_when_nothing_is_left_to_wait_for(
    tmp_path: Path, with_thread: bool
) -> None:
    # `cli.main._leave_now`: exit handlers run, buffered output flushed, the status kept; a
    # thread that is not a daemon is waited for (it returns, and the normal exit joins it)
    ran, joined = tmp_path / "atexit", tmp_path / "thread"
    code = (
        "import atexit, sys, threading, time\n"
        "from trainmeter.cli.main import _leave_now\n"
        f"atexit.register(lambda: open({str(ran)!r}, 'w').write('ran'))\n"
        "def late():\n"
        "    time.sleep(0.3)\n"
        f"    open({str(joined)!r}, 'w').write('joined')\n"
        + ("threading.Thread(target=late).start()\n" if with_thread else "")
        + "sys.stdout.write('buffered')\n"
        "_leave_now(7)\n"
        "print(' returned')\n"
        "sys.exit(3)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINMETER_")}
    import subprocess

    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env
    )
    assert ran.read_text() == "ran"
    if with_thread:
        assert (result.returncode, result.stdout) == (3, "buffered returned\n")
        assert joined.read_text() == "joined"
    else:
        assert (result.returncode, result.stdout) == (7, "buffered")
