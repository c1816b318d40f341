"""`tm top [RUN]`: a run on one full terminal, live while it runs, for a second SSH session.

It follows the run by its directory: `events.jsonl` is read as it grows, each complete line fed
through the same recorder and engine a replay uses, so the numbers are the ones `tm summary` will
print. A finished run is shown the same way, read to its end. The screen is redrawn twice a
second; `q` (or Ctrl-C) quits and gives the terminal back as it was: the alternate screen is left,
the cursor shown, the keyboard mode restored, also on SIGTERM and SIGHUP.

Not on a terminal (or with `--once`), the screen is printed once, as plain text, and `tm top`
exits: a cron job or a CI log gets a readable snapshot.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time
from pathlib import Path
from typing import Any

from trainmeter.runlog.replay import MAX_LINE

from ..payloads import RUN_END

USAGE = """\
usage: tm top [RUN] [--once]
  RUN     a run directory, or a name or prefix under .trainmeter/runs (default: the latest)
  --once  draw the screen once and exit (what a pipe gets anyway)
keys: q quits (Ctrl-C too)
"""

REFRESH_S = 0.5
_READ_MAX = 16 << 20  # bytes of the log read at one poll
CATCH_UP_POINTS = 400


class Follower:
    """Reads a growing `events.jsonl` and feeds each new complete line to a fresh engine."""

    def __init__(self, events: Path, screen: Any) -> None:
        from ..runlog import engine_load as parts
        from ..runlog.observers import ObserverSet
        from ..runlog.recorder import Recorder
        from ..runlog.store import RunStore

        self.events = events
        self.screen = screen
        self.notes: list[str] = []
        try:  # about 200 bytes a record: spread the catch-up snapshots over the log
            self._every = max(int(events.stat().st_size / 200 / CATCH_UP_POINTS), 1)
        except OSError:
            self._every = 1
        self._since_snap = 0
        self._last_snap_t: float | None = None
        warn = self._warn
        factory, missing = parts.load_engine_factory(warn)
        engine, reason = parts.make_engine(factory, warn)
        self.recorder = Recorder(RunStore(warn), warn)
        self.recorder.observers = ObserverSet([screen], warn)
        self.recorder.attach_engine(engine, missing or reason)
        self.finished = False
        from ..runlog.decode import Decoder

        self.decoder = Decoder()  # the one decoder of live ingest and replay
        self._fh: Any = None
        self._partial = b""
        self._skipping = False  # inside a line past MAX_LINE: dropped up to its newline
        self.last_growth = time.monotonic()

    def _warn(self, key: str, message: str) -> None:
        if message not in self.notes:
            self.notes.append(message)

    def poll(self) -> int:
        """Feed what was appended since the last call; the number of records fed."""
        if self._fh is None:
            self._fh = open(self.events, "rb")  # noqa: SIM115 - held open while following
        chunk = self._fh.read(_READ_MAX)  # a log that grew by gigabytes is caught up over polls
        if not chunk:
            return 0
        self.last_growth = time.monotonic()
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()  # a line still being written waits for its newline
        if self._skipping and lines:
            lines.pop(0)  # the end of a line too long to be a record (counted when it began)
            self._skipping = False
        if self._skipping or len(self._partial) > MAX_LINE:  # no record is this long
            if not self._skipping:
                self.decoder.skip("line too long")
            self._skipping = True
            self._partial = b""
        fed = 0
        for line, record in self.decoder.lines_of(lines):
            if record["kind"] == RUN_END.name:
                self.finished = True
            self.recorder.accept(line, record)
            fed += 1
            self._maybe_snapshot(record)
        return fed

    def _maybe_snapshot(self, record: dict[str, Any]) -> None:
        """While catching up on a log, a snapshot every so often in record time, so the history
        holds the run's past (tokens/s, MFU...) and not only what comes after `tm top` started.
        At most about `CATCH_UP_POINTS` over the log as it stood, and none closer than 0.1 s of record time."""
        t = record.get("t")
        if not isinstance(t, (int, float)) or isinstance(t, bool):
            return
        self._since_snap += 1
        if self._last_snap_t is not None and t - self._last_snap_t < 0.1:
            return
        if self._since_snap < self._every:
            return
        self._since_snap = 0
        self._last_snap_t = t
        self.screen.on_snapshot(self.recorder.snapshot(now=t), t)

    def snapshot(self) -> dict[str, Any]:
        return self.recorder.snapshot(now=None if self.finished else time.monotonic())

    def state(self) -> str:
        if self.finished:
            return "finished"
        from ..readable import duration

        quiet = time.monotonic() - self.last_growth
        return "running" if quiet < 30 else f"no news for {duration(quiet)}"

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()


def main(argv: list[str]) -> int:
    from .runarg import run_command

    return run_command("top", _main, argv)


def _main(argv: list[str]) -> int:
    from .runarg import split_args

    if "-h" in argv or "--help" in argv:
        print(USAGE, end="")
        return 0
    runs, opts = split_args("top", argv, {"--once"}, set())
    spec = runs[0] if runs else None
    once = bool(opts.get("--once"))

    from ..runlog.runs import RunNotFound, resolve_run

    try:
        run_dir = resolve_run(spec)
        events = run_dir / "events.jsonl"
        open(events, "rb").close()
    except RunNotFound as exc:
        print(f"tm top: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"tm top: cannot read the run log ({exc})", file=sys.stderr)
        return 1
    from ..views.terminal_console import is_tty

    if once or not is_tty(sys.stdout):
        return _print_once(events, run_dir)
    return _full_screen(events, run_dir)


def _print_once(events: Path, run_dir: Path) -> int:
    from ..views.terminal_console import make_console, terminal_width
    from ..views.top import TopScreen

    screen = TopScreen()
    follower = Follower(events, screen)
    try:
        follower.poll()
        console = make_console(sys.stdout)
        width = terminal_width(sys.stdout)
        console.print(screen.render(follower.snapshot(), source=str(run_dir),
                                    state=follower.state(), width=width, height=0))
    finally:
        follower.close()
    return 0


class _Quit(Exception):
    """SIGTERM or SIGHUP: leave the loop through the same cleanup as `q`."""


def _on_signal(signum: int, frame: Any) -> None:
    raise _Quit(signum)


def _full_screen(events: Path, run_dir: Path) -> int:
    import termios
    import tty

    from rich.live import Live

    from ..views.terminal_console import make_console
    from ..views.top import TopScreen

    screen = TopScreen()
    follower = Follower(events, screen)
    console = make_console(sys.stdout)
    stdin_fd = sys.stdin.fileno() if sys.stdin is not None and sys.stdin.isatty() else None
    saved_tty = termios.tcgetattr(stdin_fd) if stdin_fd is not None else None
    previous = {s: signal.signal(s, _on_signal) for s in (signal.SIGTERM, signal.SIGHUP)}
    status = 0
    try:
        if stdin_fd is not None:
            tty.setcbreak(stdin_fd)  # keys one at a time, no echo; Ctrl-C still interrupts
        with Live(console=console, screen=True, auto_refresh=False, transient=True) as live:
            while True:
                follower.poll()
                try:  # follow a resize
                    size = os.get_terminal_size(sys.stdout.fileno())
                    console.width, console.height = size.columns, size.lines
                except OSError:
                    pass
                width, height = console.size
                snap = follower.snapshot()
                if not follower.finished:
                    screen.on_snapshot(snap, time.monotonic())
                live.update(screen.render(snap, source=str(run_dir),
                                          state=follower.state(), width=width, height=height),
                            refresh=True)
                if _quit_pressed(stdin_fd, REFRESH_S):
                    break
    except KeyboardInterrupt:
        status = 0
    except _Quit:
        status = 0
    finally:
        if saved_tty is not None:
            termios.tcsetattr(stdin_fd, termios.TCSADRAIN, saved_tty)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        follower.close()
    return status


def _quit_pressed(fd: int | None, timeout: float) -> bool:
    """Wait up to `timeout` for a key; True for q or Q."""
    if fd is None:
        time.sleep(timeout)
        return False
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            return False
        key = os.read(fd, 32)
        if not key:  # the terminal closed
            return True
        if b"q" in key or b"Q" in key:
            return True
