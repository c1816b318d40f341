"""Signals a scheduler or a person sends to `tm` reach the child, and never kill `tm` (issue 22,
item 2). Before, SIGUSR1, SIGUSR2 and SIGALRM killed `tm` (status -10 for USR1) while the child
ran on unwatched and never heard them; SIGINT, SIGWINCH and SIGTSTP sent to `tm` alone were lost.

Every process started here gets default dispositions (`start_tm` sets them), so the tests hold
under `nohup` too.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ..conftest import default_signals, read_events, run_dirs, tm_env
from ..supervisor.procs import start_tm, wait_for, write_script

# Reports each signal it gets; ends (40 + N) on the one named in argv[2], after writing it.
TRAP = """
import os, signal, sys, time
out, last = sys.argv[1], getattr(signal, sys.argv[2])
def on(signum, frame):
    with open(out, "a") as fh:
        fh.write(signal.Signals(signum).name + "\\n")
    if signum == last:
        sys.exit(40 + signum)
for name in ("SIGINT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGWINCH", "SIGTSTP", "SIGCONT"):
    signal.signal(getattr(signal, name), on)
open(out + ".ready", "w").close()
deadline = time.monotonic() + 120  # a bound, never reached: the signal ends it
while time.monotonic() < deadline:
    time.sleep(0.02)
sys.exit(99)
"""

FORWARDED = ["SIGUSR1", "SIGUSR2", "SIGALRM", "SIGWINCH", "SIGINT", "SIGCONT"]


def _start(tmp_path: Path, last: str):
    write_script(tmp_path / "trap.py", TRAP)
    out = tmp_path / "got.txt"
    proc = start_tm(["-q", "--no-web", "trap.py", str(out), last], tmp_path)
    wait_for(Path(str(out) + ".ready"))
    return proc, out


@pytest.mark.parametrize("name", FORWARDED)
def test_a_signal_sent_to_tm_alone_reaches_the_child_and_tm_lives(tmp_path: Path, name: str) -> None:
    signum = getattr(signal, name)
    proc, out = _start(tmp_path, name)
    os.kill(proc.pid, signum)  # to tm alone, as `scancel --signal` or `kill` would
    _, err = proc.communicate(timeout=120)
    assert out.read_text().split() == [name], err
    assert proc.returncode == 40 + signum, err  # tm lived to pass on the child's status
    end = read_events(run_dirs(tmp_path)[0])[-1]
    assert end["kind"] == "run.end" and end["d"]["exit_status"] == 40 + signum


def _own_group() -> None:
    default_signals()
    os.setpgid(0, 0)


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_sigtstp_to_tm_stops_the_child_and_tm_and_sigcont_resumes_both(tmp_path: Path) -> None:
    """In its own process group but pytest's session: a group of a new session would be an
    orphan, where the kernel discards SIGTSTP's stop (POSIX), with or without `tm`."""
    write_script(tmp_path / "trap.py", TRAP)
    out = tmp_path / "got.txt"
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainmeter", "-q", "--no-web", "trap.py", str(out), "SIGCONT"],
        cwd=tmp_path, env=tm_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=_own_group,
    )
    wait_for(Path(str(out) + ".ready"))
    os.kill(proc.pid, signal.SIGTSTP)
    deadline = time.monotonic() + 60
    while _state(proc.pid) != "T":  # tm stops itself, as without a handler
        assert time.monotonic() < deadline, "tm did not stop"
        time.sleep(0.02)
    deadline = time.monotonic() + 60
    while "SIGTSTP" not in (out.read_text() if out.exists() else ""):
        assert time.monotonic() < deadline, "the child never got SIGTSTP"
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGCONT)
    _, err = proc.communicate(timeout=120)
    assert out.read_text().split() == ["SIGTSTP", "SIGCONT"], err
    assert proc.returncode == 40 + signal.SIGCONT, err


def test_tm_survives_a_usr1_after_the_child_is_gone(tmp_path: Path) -> None:
    """The child has exited and `tm` is writing the summary: a late USR1 is ignored then."""
    write_script(
        tmp_path / "quick.py",
        """
        import signal, sys
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)  # what is forwarded meanwhile: ignored
        open(sys.argv[1], "w").close()
        """,
    )
    ready = tmp_path / "ready"
    proc = start_tm(["-q", "--no-web", "quick.py", str(ready)], tmp_path)
    wait_for(ready)
    for _ in range(20):  # through the child's exit and tm's finish
        if proc.poll() is not None:
            break
        os.kill(proc.pid, signal.SIGUSR1)
        time.sleep(0.05)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
