"""The live status line, on a real terminal (a tmux pane): drawn in the reserved bottom row while
the training's own output scrolls above it, and the terminal given back afterwards, after a
normal exit, after SIGTERM, and across a resize.

The training here is a small script that reports 20 steps of 1024 tokens 10 ms apart, as the
agent would, prints a few lines, then waits for a file the test creates: so the screen is read
while the run is live, without fixed sleeps. The GPUs are the H100 fixture (fake NVML), and the
declared FLOPs per token are absurd on purpose, so that the engine raises `mfu_impossible`.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from trainmeter.views import live_status
from trainmeter.views.format import si
from trainmeter.views.live_status import status_text
from trainmeter.views.terminal import mfu_text

from ..conftest import REPO, run_dirs, run_tm
from .screen import Screen, needs_tmux, shell_env

FAKE_GPUS = REPO / "tests" / "fixtures" / "nvml" / "h100_sxm_gpm.json"

CHILD = """
import json, os, socket, sys, time
with open("tm.pid", "w") as fh:
    fh.write(str(os.getppid()))
path = os.environ["TRAINMETER_SOCKET"]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
t0 = time.monotonic()
lines = []
for n in range(1, 21):
    t = t0 + 0.01 * n
    lines.append(json.dumps({"v": 1, "t": t, "src": "agent", "rank": 0, "pid": os.getpid(),
        "kind": "step", "d": {"k": 1, "tokens": 1024, "n": n, "micro": 1}}))
    lines.append(json.dumps({"v": 1, "t": t, "src": "emit", "rank": 0, "pid": os.getpid(),
        "kind": "metric", "d": {"key": "train_loss", "value": 3.0 - 0.1 * n, "via": "emit",
        "step": n}}))
for i in range(0, len(lines), 10):
    s.sendto("\\n".join(lines[i:i + 10]).encode(), path)
# each line in one write: print() writes the text and its newline apart when unbuffered, and
# tm's own lines (the dashboard's address) may land between two writes of the training's
for i in range(1, 6):
    os.write(1, f"training says {i}\\n".encode())
while not os.path.exists("go"):
    time.sleep(0.02)
os.write(1, b"training done\\n")
"""

# 20 steps x 1024 tokens, 10 ms apart; 40 steps declared: half way.
TM_ARGS = "--no-agent --budget-steps 40 --flops-per-token 100B --convention megatron child.py"


def _start(tmp_path: Path, cols: int = 120, rows: int = 14) -> Screen:
    (tmp_path / "child.py").write_text(CHILD)
    screen = Screen(tmp_path, cols=cols, rows=rows)
    env = shell_env(TRAINMETER_FAKE_NVML=str(FAKE_GPUS))
    # after tm: its status, then enough lines to scroll the whole screen, then END at the bottom
    screen.type(
        f"clear; {env} {sys.executable} -m trainmeter {TM_ARGS}; echo tm exited $?; "
        "seq 1 30; printf END"
    )
    return screen


def _status_row(lines: list[str]) -> str:
    return lines[-1]


def _is_status(line: str) -> bool:
    return line.startswith("tm  ")


def _finished(lines: list[str]) -> bool:
    return lines[-1].startswith("END")


def _given_back(screen: Screen) -> None:
    """The whole screen scrolls again and nothing of the status line is left on it."""
    lines = screen.wait_for(_finished, what="END on the bottom row")
    assert lines[-2] == "30" and lines[-3] == "29", lines  # the bottom row scrolls with the rest
    assert not any(_is_status(line) for line in lines), lines
    raw = screen.raw_through(b"\r\n30\r\nEND")  # all the pane was sent, the shell's last
    assert b"\x1b[1;13r" in raw  # the bottom row of 14 was reserved ...
    last_region = max(raw.rfind(b"\x1b[1;13r"), raw.rfind(b"\x1b[1;15r"))
    assert raw.rfind(b"\x1b[r") > last_region  # ... and the full region set again after it


@needs_tmux
def test_status_line_live_then_terminal_given_back(tmp_path: Path) -> None:
    screen = _start(tmp_path)
    try:
        # the training's last line too: it prints after sending its steps, so a status line
        # can be drawn from them while the training waits for a core to print on
        lines = screen.wait_for(
            lambda ls: all(x in _status_row(ls) for x in ("20/40 steps", "OFU"))
            and sum("trainmeter: alert" in line for line in ls) == 2
            and "training says 5" in ls,
            what="the status line at 20/40 steps with OFU (two GPU samples), both alerts, and "
            "the training's five lines",
        )
        status = _status_row(lines)
        # the training's own output scrolls above the status line, untouched
        for i in range(1, 6):
            assert f"training says {i}" in lines[:-1]
        assert "50.0%" in status and "loss 1" in status and "OFU " in status and "ETA" in status
        assert "(megatron) impossible" in status  # 517% MFU, and the engine said so
        # each alert once, as its own line in the scrolling part
        alert_lines = [line for line in lines if "alert mfu_impossible" in line]
        assert len(alert_lines) == 1 and alert_lines[0].startswith("trainmeter: alert")
        assert sum("alert gpu_throttle" in line for line in lines) == 1
        live = status
        (tmp_path / "go").write_text("")
        _given_back(screen)
        text = screen.history()
        assert "training done" in text and "tm exited 0" in text
        assert not any(_is_status(line) for line in text.splitlines())  # nowhere, ever
        final = json.loads((run_dirs(tmp_path)[-1] / "summary.json").read_text())
        # Live, tokens/s is over the trailing window; once finished, over the steady state
        # (engine/rate.py). What holds by construction, whatever the timing: the child stamps
        # its 20 steps 10 ms apart, so both windows give 1024 tokens / 10 ms = 102.4k, and the
        # line after the run prints the final snapshot's own value.
        assert final["rate_window"]["kind"] == "steady"
        assert final["tokens_per_s"] == pytest.approx(102_400.0)
        assert "102k tok/s" in live
        assert f"{si(final['tokens_per_s'])} tok/s" in text
        assert mfu_text(final) in live  # the same tokens/s, GPUs and peak: the same MFU
        assert sum("alert mfu_impossible" in line for line in text.splitlines()) == 1
        # and `tm summary` puts the alerts first, and says the MFU shown is impossible
        summary = run_tm(["summary"], tmp_path).stdout
        flat = [" ".join(line.split()) for line in summary.splitlines()]
        assert flat.index("Alerts (2)") < flat.index("Throughput")
        assert any(line.startswith("! mfu_impossible MFU is above 100%") for line in flat)
        assert f"{mfu_text(final)} impossible: see the alert above" in flat
    finally:
        screen.close()


@needs_tmux
@pytest.mark.parametrize(
    ("how", "status"), [("SIGTERM", 143), ("SIGHUP", 129), ("Ctrl-C", 130)]
)  # 128 + the signal that ended the child, as a shell reports it
def test_signals_give_the_terminal_back(tmp_path: Path, how: str, status: int) -> None:
    screen = _start(tmp_path)
    try:
        screen.wait_for(lambda ls: _is_status(ls[-1]) and "steps" in ls[-1], what="the status")
        if how == "Ctrl-C":
            screen.keys("C-c")  # the terminal signals the whole foreground group
        else:
            pid = int((tmp_path / "tm.pid").read_text())
            os.kill(pid, getattr(signal, how))  # tm forwards it; the child dies of it
        _given_back(screen)
        assert f"tm exited {status}" in screen.history()
    finally:
        screen.close()


@needs_tmux
def test_resize_moves_the_status_line_to_the_new_bottom(tmp_path: Path) -> None:
    screen = _start(tmp_path)
    try:
        screen.wait_for(lambda ls: _is_status(ls[-1]) and "steps" in ls[-1], what="the status")
        screen.resize(120, 16)
        lines = screen.wait_for(
            lambda ls: _is_status(ls[-1]) and len(ls) == 16, what="the status on row 16"
        )
        assert sum(_is_status(line) for line in lines) == 1, lines  # no stale copy left
        # the region set again for 16 rows (in the file once the pipe has brought it there)
        assert b"\x1b[1;15r" in screen.raw_through(b"\x1b[1;15r", what="the region for 16 rows")
        (tmp_path / "go").write_text("")
        lines = screen.wait_for(_finished, what="END on the bottom row")
        assert lines[-2] == "30" and not any(_is_status(line) for line in lines), lines
    finally:
        screen.close()


# ---- without a terminal ---------------------------------------------------------------------


class _Stream:
    def __init__(self, tty: bool) -> None:
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty

    def fileno(self) -> int:
        return 2


@pytest.mark.parametrize(
    ("quiet", "tty", "term", "on"),
    [(False, True, "xterm", True), (True, True, "xterm", False), (False, False, "xterm", False),
     (False, True, "dumb", False)],
)
def test_on_only_on_a_terminal_and_without_q(monkeypatch, quiet, tty, term, on) -> None:
    monkeypatch.setenv("TERM", term)
    assert live_status.wanted(SimpleNamespace(quiet=quiet), _Stream(tty)) is on


def test_status_drops_the_least_wanted_parts_when_narrow() -> None:
    snap = {
        "steps": 20, "progress": 0.5, "budget": {"unit": "steps", "value": 40},
        "tokens_per_s": 102_400.0, "mfu": {"value": 0.381, "convention": "megatron"},
        "ofu": {"value": 0.42}, "eta_s": 20.0,
        "series": {"train_loss": {"value": 1.0}},
    }
    wide = status_text(snap, 200, elapsed=20.0).plain
    assert wide == (
        "tm  █████░░░░░ 50.0% 20/40 steps  102k tok/s  MFU 38.1% (megatron)  OFU 42.0%  "
        "loss 1  ETA 20.0 s  20.0 s"
    )
    # 90 columns: the bar and the elapsed time go first, the six numbers stay
    assert status_text(snap, 90, elapsed=20.0).plain == (
        "tm  50.0% 20/40 steps  102k tok/s  MFU 38.1% (megatron)  OFU 42.0%  loss 1  ETA 20.0 s"
    )
    narrow = status_text(snap, 60, elapsed=20.0).plain
    assert len(narrow) <= 60
    # progress, tokens/s and MFU are what a glance is for: they stay
    assert narrow == "tm  50.0% 20/40 steps  102k tok/s  MFU 38.1% (megatron)"


def test_status_shows_what_is_done_in_the_budgets_unit() -> None:
    snap = {"steps": 20, "progress": 0.25, "flops_spent": 3e18,
            "budget": {"unit": "flops", "value": 1.2e19}}
    assert "25.0% 3000P/12000P FLOP" in status_text(snap, 200, elapsed=1.0).plain


@needs_tmux
def test_ctrl_z_gives_the_shell_the_whole_terminal_until_fg(tmp_path: Path) -> None:
    (tmp_path / "child.py").write_text(CHILD)
    screen = Screen(tmp_path, cols=120, rows=14)
    try:
        env = shell_env(TRAINMETER_FAKE_NVML=str(FAKE_GPUS))
        screen.type(f"clear; {env} {sys.executable} -m trainmeter {TM_ARGS}")  # alone: a job
        screen.wait_for(lambda ls: _is_status(ls[-1]) and "steps" in ls[-1], what="the status")
        screen.keys("C-z")
        lines = screen.wait_for(lambda ls: any("Stopped" in line for line in ls), what="stopped")
        assert not any(_is_status(line) for line in lines), lines  # the row is the shell's again
        screen.type("echo shell here")
        screen.wait_for(lambda ls: "shell here" in ls, what="the shell's own output")
        screen.type("fg; echo tm exited $?; seq 1 30; printf END")
        screen.wait_for(lambda ls: _is_status(ls[-1]), what="the status back after fg")
        (tmp_path / "go").write_text("")
        _given_back(screen)
        assert "tm exited 0" in screen.history()
    finally:
        screen.close()


def _drain(fd: int, until: bytes = b"") -> str:
    """What the pty's other end has to read: with `until`, everything up to those last bytes
    (the kernel hands a pty's writes over on a worker of its own, so on a loaded machine they
    may arrive well after the write returned), then whatever follows within 50 ms."""
    import select
    import time

    out = b""
    deadline = time.monotonic() + 60
    while until and not out.rstrip().endswith(until):
        assert time.monotonic() < deadline, f"never got {until!r}; got {out!r}"
        if select.select([fd], [], [], 0.5)[0]:
            out += os.read(fd, 65536)
    while select.select([fd], [], [], 0.05)[0]:
        out += os.read(fd, 65536)
    return out.decode("utf-8", "replace")


def test_observer_contract_on_a_pty_alerts_and_observe_only_once() -> None:
    """The observer alone, on a pseudo-terminal of 10 rows: each line once, region set and reset."""
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 10, 80, 0, 0))
    try:
        status = live_status.LiveStatus(slave, colour=False, signals=False)
        status._foreground = lambda: True  # the test process does not own this pty
        snap = {
            "steps": 3,
            "facts": {"observe_only": {"value": "the command is not Python: GPU and host only"}},
            "alerts": [{"kind": "stuck", "key": "stuck", "message": "no step for 60 s"}],
        }
        status.on_snapshot(snap, 1.0)
        status.on_snapshot(snap, 2.0)  # the same alert and reason again: not repeated
        late = dict(snap, alerts=[*snap["alerts"], {"kind": "straggler", "message": "rank 1"}])
        status.on_finish(late)  # an alert first seen in the final snapshot still gets its line
        out = _drain(master, until=b"\x1b[r\x1b[10;1H\x1b[2K\x1b8")  # the last it writes
        assert out.count("trainmeter: observe-only: the command is not Python") == 1
        assert out.count("trainmeter: alert stuck: no step for 60 s") == 1
        assert out.count("trainmeter: alert straggler: rank 1") == 1
        assert out.index("\x1b[1;9r") < out.index("tm  3 steps")  # row 10 reserved, then drawn
        assert out.rstrip().endswith("\x1b[r\x1b[10;1H\x1b[2K\x1b8")  # given back, row erased
        assert "\x1b[1m" not in out  # no colour asked for
        status.on_snapshot(snap, 3.0)  # after the end: nothing more is drawn
        assert _drain(master) == ""
    finally:
        os.close(slave)
        os.close(master)


def test_status_says_which_window_tokens_per_s_is_over() -> None:
    snap = {"steps": 20, "tokens_per_s": 102_400.0,
            "rate_window": {"kind": "trailing", "span_s": 30.0, "seconds": 30.2, "steps": 600}}
    assert status_text(snap, 200, elapsed=40.0).plain == "tm  20 steps  102k tok/s (last 30 s)  40.0 s"
    young = {**snap, "rate_window": {"kind": "trailing", "span_s": 30.0, "seconds": 2.5}}
    assert "102k tok/s (last 2.5 s)" in status_text(young, 200).plain
    ended = {**snap, "rate_window": {"kind": "steady", "seconds": 61.0}}
    assert "102k tok/s (steady)" in status_text(ended, 200).plain
    # narrow: the window goes before the tokens/s it qualifies
    assert status_text(snap, 30, elapsed=40.0).plain == "tm  20 steps  102k tok/s"


def test_status_shows_memory_now_gpu_and_cpu() -> None:
    gib, mib = 2**30, 2**20
    gpu = {"steps": 20, "memory": {"ranks": {
        "0": {"device": "cuda", "reserved_b": 61.2 * gib, "total_b": 80 * gib},
        "1": {"device": "cuda", "reserved_b": 20 * gib, "total_b": 80 * gib}}}}
    assert status_text(gpu, 200).plain == "tm  20 steps  mem 61.2/80.0 GiB"
    cpu = {"steps": 20, "memory": {"ranks": {"0": {"device": "cpu", "rss_b": 304 * mib}}}}
    assert status_text(cpu, 200).plain == "tm  20 steps  RSS 304 MiB"
    assert "RSS" not in status_text({"steps": 20}, 200).plain  # no reading: nothing, not zero


class _Writes:
    """A text stream that keeps each write() call apart."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def write(self, text: str) -> int:
        self.calls.append(text)
        return len(text)

    def flush(self) -> None:
        pass


def test_tms_own_lines_are_one_write_each(tmp_path: Path) -> None:
    """The training shares the terminal: a line of tm's written in two parts (print writes the
    newline apart) lets the training's output land inside it (the cause of this file's flake,
    'training says 1trainmeter: dashboard http://...'). Each line is one write."""
    from trainmeter.runlog.warn import WarnOnce
    from trainmeter.supervisor.session import Session
    from trainmeter.views.web.live import WebDashboard

    out = _Writes()
    WarnOnce(out)("k", "a warning")
    Session.say(SimpleNamespace(stderr=out), "the end line")  # type: ignore[arg-type]
    web = WebDashboard(0, tmp_path, stderr=out)
    try:
        assert out.calls == [
            "trainmeter: a warning\n", "the end line\n", f"trainmeter: dashboard {web.url}\n"
        ]
    finally:
        web.close()


def test_off_in_the_background_said_once_with_why() -> None:
    """Not the terminal's foreground job (under `timeout`, or with &): nothing drawn, and one
    line that says the status line is off and why (before, it disappeared without a word)."""
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 10, 80, 0, 0))
    try:
        status = live_status.LiveStatus(slave, colour=False, signals=False)
        status._foreground = lambda: False
        for t in (1.0, 2.0, 3.0):
            status.on_snapshot({"steps": 3}, t)
        status.close()
        out = _drain(master, until=b"the dashboard and tm summary have every number")
        assert out.count("status line off") == 1
        assert "not this terminal's foreground job" in out and "timeout" in out
        assert "tm  3 steps" not in out and "\x1b[1;9r" not in out  # nothing drawn, no region
        # with the terminal's TOSTOP on, a background write would stop tm: it says nothing
        attrs = termios.tcgetattr(slave)
        attrs[3] |= termios.TOSTOP
        termios.tcsetattr(slave, termios.TCSANOW, attrs)
        quiet = live_status.LiveStatus(slave, colour=False, signals=False)
        quiet._foreground = lambda: False
        quiet.on_snapshot({"steps": 3}, 1.0)
        quiet.close()
        assert _drain(master) == ""
    finally:
        os.close(slave)
        os.close(master)


@needs_tmux
def test_under_timeout_the_status_line_says_once_that_it_is_off(tmp_path: Path) -> None:
    """`timeout` in a script (no job control) puts tm in a process group of its own, not the
    terminal's foreground one: the status line cannot be drawn, and one line in the pane says
    so and why, instead of nothing. (At an interactive prompt the shell makes the job the
    foreground group, and the line is drawn as usual.)"""
    (tmp_path / "child.py").write_text(CHILD)
    screen = Screen(tmp_path, cols=120, rows=14)
    try:
        env = shell_env(TRAINMETER_FAKE_NVML=str(FAKE_GPUS))
        # a script's two commands (a lone one bash would exec, keeping the job's group)
        screen.type(f"clear; {env} bash -c 'timeout 120 {sys.executable} -m trainmeter "
                    f"{TM_ARGS}; echo tm exited $?'; printf END")
        screen.wait_for(lambda ls: any("status line off" in line for line in ls),
                        what="the line that says the status line is off")
        (tmp_path / "go").write_text("")
        screen.wait_for(_finished, what="END after tm")
        text = screen.history()
        assert text.count("status line off") == 1
        assert "not this terminal's foreground job" in text and "tm exited 0" in text
        assert not any(_is_status(line) for line in text.splitlines())
        # no row was reserved, in all the pane was sent (the shell's END the last of it)
        assert b"\x1b[1;13r" not in screen.raw_through(b"tm exited 0\r\nEND")
    finally:
        screen.close()
