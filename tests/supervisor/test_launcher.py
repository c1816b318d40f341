"""The launcher with real processes: exit statuses, signals, the terminal left alone."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from trainmeter.supervisor.launcher import ChildExit, child_env, exit_status

from ..conftest import read_events, run_dirs, run_tm, tm_env
from .procs import ctrl_c, start_tm, start_tm_on_terminal, wait_for, write_script

# A child that reports every signal it gets into a file, says it is ready, then waits.
TRAP = """
import os, signal, sys, time
out = sys.argv[1]
def on(signum, frame):
    with open(out, "a") as fh:
        fh.write(signal.Signals(signum).name + "\\n")
    if signum != signal.SIGINT:
        sys.exit(40 + signum)
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
    signal.signal(s, on)
open(out + ".ready", "w").close()
deadline = time.monotonic() + 120  # a bound, never reached: the signal ends it
while time.monotonic() < deadline:
    if os.path.exists(out) and "SIGINT" in open(out).read():
        time.sleep(0.5)  # tm must still be waiting for us after this
        with open(out, "a") as fh:
            fh.write("done\\n")
        sys.exit(7)
    time.sleep(0.02)
sys.exit(99)
"""


def test_exit_status_maps_signals_to_128_plus_n() -> None:
    assert exit_status(0) == ChildExit(0, None)
    assert exit_status(3) == ChildExit(3, None)
    assert exit_status(-9) == ChildExit(137, 9)  # 128 + SIGKILL(9)
    assert exit_status(-15) == ChildExit(143, 15)  # 128 + SIGTERM(15)


def test_child_env_adds_the_socket_and_the_bootstrap_in_front(tmp_path: Path) -> None:
    env = child_env({"PYTHONPATH": "/mine", "HOME": "/h"}, "/s/ingest.sock")
    assert env["TRAINMETER_SOCKET"] == "/s/ingest.sock"
    first, rest = env["PYTHONPATH"].split(os.pathsep, 1)
    assert first.endswith(os.path.join("trainmeter", "agent", "bootstrap"))
    assert Path(first, "sitecustomize.py").is_file()
    assert rest == "/mine" and env["HOME"] == "/h"
    quiet = child_env({}, "/s/x", agent=False, tap=False)
    assert "PYTHONPATH" not in quiet and quiet["TRAINMETER_NO_TAP"] == "1"


@pytest.mark.parametrize("status", [0, 3])
def test_tm_returns_the_childs_exit_status(tmp_path: Path, status: int) -> None:
    write_script(tmp_path / "t.py", f"import sys; print('out'); sys.exit({status})")
    result = run_tm(["t.py"], tmp_path)
    assert result.returncode == status
    assert result.stdout == "out\n"  # the child's stdout is the terminal's, untouched
    end = read_events(run_dirs(tmp_path)[0])[-1]
    assert end["kind"] == "run.end" and end["d"]["exit_status"] == status


def test_child_killed_by_sigkill_gives_137(tmp_path: Path) -> None:
    write_script(tmp_path / "k.py", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    result = run_tm(["-q", "k.py"], tmp_path)
    assert result.returncode == 137  # 128 + 9
    end = read_events(run_dirs(tmp_path)[0])[-1]["d"]
    assert (end["exit_status"], end["signal"]) == (137, 9)


def test_the_child_reads_the_terminals_stdin(tmp_path: Path) -> None:
    write_script(tmp_path / "r.py", "import sys; print(sys.stdin.read().upper())")
    result = run_tm(["-q", "r.py"], tmp_path, input="typed\n")
    assert result.returncode == 0 and result.stdout == "TYPED\n\n"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT])
def test_signals_sent_to_tm_are_forwarded_to_the_child(tmp_path: Path, signum: int) -> None:
    write_script(tmp_path / "trap.py", TRAP)
    out = tmp_path / "got.txt"
    proc = start_tm(["-q", "trap.py", str(out)], tmp_path)
    wait_for(Path(str(out) + ".ready"))
    os.kill(proc.pid, signum)  # to tm alone, as a scheduler would
    _, err = proc.communicate(timeout=120)
    assert out.read_text().split() == [signal.Signals(signum).name]
    assert proc.returncode == 40 + signum, err  # the child's own status, passed through
    end = read_events(run_dirs(tmp_path)[0])[-1]["d"]
    assert end["exit_status"] == 40 + signum


def test_ctrl_c_reaches_both_and_tm_waits_for_the_child(tmp_path: Path) -> None:
    write_script(tmp_path / "trap.py", TRAP)
    out = tmp_path / "got.txt"
    proc, terminal = start_tm_on_terminal(["-q", "trap.py", str(out)], tmp_path)
    wait_for(Path(str(out) + ".ready"))
    ctrl_c(terminal)  # the terminal signals its whole foreground group
    _, err = proc.communicate(timeout=120)
    os.close(terminal)
    # the child got SIGINT once (tm did not forward a second), finished its 0.5 s of clean-up,
    # and tm returned its status 7 after that, not 130
    assert out.read_text().split() == ["SIGINT", "done"], err
    assert proc.returncode == 7, err
    assert "Traceback" not in err


def test_ctrl_c_kills_a_child_that_does_not_handle_it(tmp_path: Path) -> None:
    write_script(
        tmp_path / "sleepy.py",
        """
        import signal, sys, time
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # not ignored
        open(sys.argv[1], "w").close()
        time.sleep(30)
        """,
    )
    ready = tmp_path / "ready"
    proc, terminal = start_tm_on_terminal(["-q", "sleepy.py", str(ready)], tmp_path)
    wait_for(ready)
    ctrl_c(terminal)
    _, err = proc.communicate(timeout=120)
    os.close(terminal)
    # an uncaught KeyboardInterrupt makes Python die of SIGINT itself: 128 + 2
    assert proc.returncode == 130, err
    assert "KeyboardInterrupt" in err
    end = read_events(run_dirs(tmp_path)[0])[-1]
    assert end["kind"] == "run.end" and end["d"]["signal"] == 2


def test_sigterm_to_a_child_without_handler_gives_143(tmp_path: Path) -> None:
    write_script(
        tmp_path / "s.py",
        "import sys, time\nopen(sys.argv[1], 'w').close()\ntime.sleep(30)\n",
    )
    ready = tmp_path / "ready"
    proc = start_tm(["-q", "s.py", str(ready)], tmp_path)
    wait_for(ready)
    os.kill(proc.pid, signal.SIGTERM)
    proc.communicate(timeout=120)
    assert proc.returncode == 143  # 128 + 15
    end = read_events(run_dirs(tmp_path)[0])[-1]["d"]
    assert (end["exit_status"], end["signal"]) == (143, 15)


def test_any_command_after_double_dash(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\necho \"shell $1\"\nexit 5\n")
    script.chmod(0o755)
    result = run_tm(["--", "./run.sh", "hi"], tmp_path)
    assert result.returncode == 5 and result.stdout == "shell hi\n"
    assert run_dirs(tmp_path)[0].name.endswith("-run.sh")


def test_command_not_found_is_127_and_leaves_no_run_directory(tmp_path: Path) -> None:
    result = run_tm(["--", "no-such-command-xyz"], tmp_path)
    assert result.returncode == 127
    assert result.stderr.splitlines() == ["tm: no-such-command-xyz: command not found"]
    assert not (tmp_path / ".trainmeter").exists()  # nothing ran: nothing to keep


def test_not_executable_is_126(tmp_path: Path) -> None:
    (tmp_path / "plain.sh").write_text("echo hi\n")  # no x bit
    result = run_tm(["--", "./plain.sh"], tmp_path)
    assert result.returncode == 126
    assert result.stderr.splitlines() == ["tm: ./plain.sh: permission denied"]
    assert not (tmp_path / ".trainmeter").exists()


def test_missing_script_is_127_with_one_line(tmp_path: Path) -> None:
    result = run_tm(["nope.py"], tmp_path)
    assert result.returncode == 127
    assert result.stderr.splitlines() == ["tm: nope.py: no such file"]
    assert not (tmp_path / ".trainmeter").exists()


def test_python_is_the_one_tm_runs_under(tmp_path: Path) -> None:
    write_script(tmp_path / "w.py", "import sys; print(sys.executable)")
    result = run_tm(["-q", "w.py"], tmp_path)
    assert os.path.realpath(result.stdout.strip()) == os.path.realpath(sys.executable)


def test_an_ignored_signal_stays_ignored_for_the_child(tmp_path: Path) -> None:
    """`nohup tm train.py`: SIGHUP is ignored when tm starts, and the child must inherit that,
    exactly as under `nohup python train.py` (a handler in tm would be reset by exec)."""
    write_script(
        tmp_path / "h.py",
        "import signal; print(signal.getsignal(signal.SIGHUP) is signal.SIG_IGN,"
        " signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)",
    )
    result = subprocess.run(
        [sys.executable, "-m", "trainmeter", "-q", "--no-agent", "h.py"],
        cwd=tmp_path, env=tm_env(), capture_output=True, text=True, timeout=60,
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_after_the_child_exited_does_not_change_the_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, signum: int
) -> None:
    """A scheduler's second SIGTERM while tm writes the summary: still the child's status."""
    from trainmeter.cli.args import parse_run_args
    from trainmeter.supervisor import session as session_mod

    monkeypatch.chdir(tmp_path)
    write_script(tmp_path / "t.py", "import sys; sys.exit(3)")
    real_finish = session_mod.Session.finish

    def finish(self, child):  # type: ignore[no-untyped-def]
        os.kill(os.getpid(), signum)  # delivered now, in the main thread
        real_finish(self, child)

    monkeypatch.setattr(session_mod.Session, "finish", finish)
    before = signal.getsignal(signum)
    opts = parse_run_args(["-q", "--no-agent", "t.py"])
    status = session_mod.supervise(opts, samplers_factory=lambda pid, run_dir: [], watcher=object())
    assert status == 3
    assert signal.getsignal(signum) is before  # put back as it was
    assert (run_dirs(tmp_path)[0] / "summary.json").exists()


def test_the_childs_signals_are_never_at_their_default_between_its_end_and_the_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, the launcher put the dispositions back as the child ended (the default, for a tm
    started from a terminal: SIGTERM and SIGUSR1 kill) and `supervise` ignored them only a
    moment later: a scheduler's signal in between killed tm, and the child's status was lost.
    The moment is read here, instead of waiting for a signal to land in it."""
    from trainmeter.cli.args import parse_run_args
    from trainmeter.supervisor import session as session_mod

    watched = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1)
    monkeypatch.chdir(tmp_path)
    write_script(tmp_path / "t.py", "import sys; sys.exit(3)")
    real = session_mod.Launcher.signals
    between: dict[int, object] = {}

    @contextlib.contextmanager
    def signals(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        with real(self, *args, **kwargs):
            yield
        between.update({s: signal.getsignal(s) for s in watched})  # the child has ended

    monkeypatch.setattr(session_mod.Launcher, "signals", signals)
    before = {s: signal.getsignal(s) for s in watched}
    opts = parse_run_args(["-q", "--no-agent", "t.py"])
    status = session_mod.supervise(opts, samplers_factory=lambda pid, run_dir: [], watcher=object())
    assert status == 3
    assert between == {s: signal.SIG_IGN for s in watched}
    assert {s: signal.getsignal(s) for s in watched} == before  # all put back at the end
