"""The live status line: one line at the bottom of the terminal while `tm` runs.

The training keeps the real terminal: nothing is put between the child and it (no pipe, no pty),
so progress bars, colours and `pdb` work as without `tm`. The line is drawn by reserving the
bottom row with the terminal's scroll region (DECSTBM, `ESC [ 1 ; rows-1 r`): the training's own
output scrolls in the rows above, and `tm` writes its line in the reserved row between a cursor
save and restore (`ESC 7` ... `ESC 8`), so the child's cursor is where it left it.

The region is given back (`ESC [ r`) and the line erased when the run ends, before the summary
line: after a normal exit and after SIGINT, SIGTERM or SIGHUP (the launcher forwards those to the
child and `tm` finishes once it is gone), and at interpreter exit if anything went wrong in
between. A resize (SIGWINCH) sets the region again for the new height and redraws at once; a stop
(Ctrl-Z, SIGTSTP) gives the whole terminal to the shell until the run is back in the foreground.

Alerts are printed once each, as their own line in the scrolling part, when the engine raises
them; so is the reason when the run can only be observed from outside.

Only on a terminal (stderr a tty, TERM not dumb, at least 4 rows) and not with `-q`.
"""

from __future__ import annotations

import atexit
import os
import signal
import threading
import time
from typing import Any

from ..snapread import get_dict
from .format import duration, percent, si
from .memory_text import alert_numbers, now_figure
from .terminal import (
    alerts,
    loss_text,
    mfu_text,
    number,
    plural,
    rate_window_label,
    run_elapsed,
    train_loss,
)

ESC = "\x1b"
SAVE, RESTORE = ESC + "7", ESC + "8"
ERASE_LINE = ESC + "[2K"
RESET_REGION = ESC + "[r"
MIN_ROWS = 4
#: The priority of the rate's window beside tok/s ("(last 30 s)"): kept before OFU and the
#: elapsed time, dropped before ETA, loss and MFU when the terminal is narrow.
WINDOW = 4.5


def region(rows: int) -> str:
    """Scroll only rows 1..rows-1 (DECSTBM moves the cursor home, hence save/restore)."""
    return f"{SAVE}{ESC}[1;{rows - 1}r{RESTORE}"


def at_row(row: int, text: str) -> str:
    return f"{SAVE}{ESC}[{row};1H{ERASE_LINE}{text}{RESTORE}"


def status_parts(snap: dict[str, Any], elapsed: float | None) -> list[tuple[float, list[tuple[str, str]]]]:
    """The status as (priority, [(text, style)...]) pieces; low priority goes first when narrow."""
    parts: list[tuple[float, list[tuple[str, str]]]] = []
    steps = number(snap.get("steps")) or 0
    progress = number(snap.get("progress"))
    budget = get_dict(snap, "budget")
    if progress is not None:
        cells = 10
        full = int(min(max(progress, 0.0), 1.0) * cells)
        unit = budget.get("unit") if budget else None
        if unit == "steps":
            done = f"{si(steps)}/{si(budget.get('value'))} steps"
        elif unit == "tokens":
            done = f"{si(snap.get('tokens_seen'))}/{si(budget.get('value'))} tokens"
        elif unit == "flops" and number(snap.get("flops_spent")) is not None:
            done = f"{si(snap.get('flops_spent'))}/{si(budget.get('value'))} FLOP"
        else:
            done = f"{si(steps)} steps"
        parts.append((2, [("█" * full, "green"), ("░" * (cells - full), "dim")]))  # goes first
        parts.append((9, [(percent(progress), "bold"), (f" {done}", "")]))
    elif steps:
        parts.append((9, [(f"{si(steps)} steps", "bold")]))
    else:
        parts.append((9, [("waiting for the first step", "dim")]))
    tps = number(snap.get("tokens_per_s"))
    if tps is not None:
        parts.append((8, [(si(tps), "bold"), (" tok/s", "")]))
        window = rate_window_label(snap)
        if window:  # right after tok/s; dropped before MFU, loss and ETA when narrow
            parts.append((WINDOW, [(f"({window})", "dim")]))
    mfu = mfu_text(snap)
    if mfu:
        if any(a.get("kind") == "mfu_impossible" for a in alerts(snap)):
            parts.append((7, [(mfu, "bold red"), (" impossible", "red")]))
        else:
            parts.append((7, [(mfu, "bold cyan")]))
    ofu = get_dict(snap, "ofu")
    if ofu and number(ofu.get("value")) is not None:
        parts.append((4, [(f"OFU {percent(ofu['value'])}", "cyan")]))
    loss = train_loss(snap)
    if loss is not None:
        parts.append((6, [("loss ", ""), (loss_text(loss), "bold")]))
    eta = number(snap.get("eta_s"))
    if eta is not None:
        parts.append((5, [("ETA ", ""), (duration(eta), "bold")]))
    memory = now_figure(snap)
    if memory is not None:  # "mem 61.2/80.0 GiB" (reserved, fullest rank), "RSS 304 MiB" on CPU
        warn = any(str(a.get("kind") or "").startswith("memory_") for a in alerts(snap))
        parts.append((4.7, [(f"{memory[0]} ", "red" if warn else ""),
                            (memory[1], "bold red" if warn else "bold")]))
    if elapsed is not None:
        parts.append((3, [(duration(elapsed), "dim")]))
    n = len(alerts(snap))
    if n:
        parts.append((3.5, [(plural(n, "alert"), "bold red")]))  # each also has its own line
    return parts


def status_text(snap: dict[str, Any], width: int, elapsed: float | None = None):
    """The line as a rich Text no wider than `width`: pieces dropped lowest priority first."""
    from rich.text import Text

    parts = status_parts(snap, elapsed)

    def build(chosen: list[tuple[float, list[tuple[str, str]]]]) -> Text:
        text = Text()
        text.append("tm  ", style="bold magenta")
        for i, (_, pieces) in enumerate(chosen):
            if i:
                # the bar, then its %; tok/s, then its window: one space
                text.append(" " if chosen[i - 1][0] == 2 or chosen[i][0] == WINDOW else "  ")
            for piece, style in pieces:
                text.append(piece, style=style or None)
        return text

    chosen = list(parts)
    text = build(chosen)
    while text.cell_len > width and len(chosen) > 1:
        lowest = min(range(len(chosen)), key=lambda i: chosen[i][0])
        del chosen[lowest]
        text = build(chosen)
    text.truncate(width)
    return text


class LiveStatus:
    """An observer (see `runlog.observers`) that draws the status line on a terminal."""

    name = "status"

    def __init__(self, fd: int, *, colour: bool = True, signals: bool = True) -> None:
        self.fd = fd
        self.colour = colour
        self.t0 = time.monotonic()
        self.rows = 0  # the height the region was set for; 0: not drawn yet
        self.cols = 0
        self.closed = False
        self.line = ""
        self.snap: dict[str, Any] = {}
        self._alerted: set[Any] = set()
        self._observe_only_said = False
        self._off_said = False  # "the status line is off while ..." said once
        self._lock = threading.Lock()
        self._console: Any = None
        self._previous_winch: Any = None
        self._previous_tstp: Any = None
        if signals:
            self._install_winch()
        atexit.register(self.close)

    # ---- terminal I/O ------------------------------------------------------------------------

    def _write(self, text: str) -> None:
        try:
            os.write(self.fd, text.encode("utf-8", "replace"))
        except OSError:  # the terminal went away (SIGHUP): nothing left to draw on
            self.closed = True

    def _size(self) -> tuple[int, int]:
        size = os.get_terminal_size(self.fd)
        return size.lines, size.columns

    def _render(self, text: Any) -> str:
        if self._console is None:
            from .terminal_console import make_console

            self._console = make_console(None, width=1000, colour=self.colour)
        with self._console.capture() as capture:
            self._console.print(text, end="", overflow="crop", no_wrap=True)
        return capture.get()

    # ---- drawing -----------------------------------------------------------------------------

    def _layout(self) -> bool:
        """Reserve the bottom row for the current height; False when the terminal is too small.

        On the first draw and after a resize: the full region again, a row freed below the
        cursor (a line feed at the bottom scrolls the screen up, then back up one), everything
        below the cursor erased (a stale status line the terminal kept where the old bottom
        was), then the region for the new height.
        """
        rows, cols = self._size()
        if rows == self.rows and cols == self.cols:
            return rows >= MIN_ROWS
        drawn = self.rows >= MIN_ROWS
        self.rows, self.cols = rows, cols
        if rows < MIN_ROWS:
            if drawn:
                self._write(f"{SAVE}{RESET_REGION}{RESTORE}")
            return False
        self._write(
            f"{SAVE}{RESET_REGION}{RESTORE}{ESC}D{ESC}M"
            f"{SAVE}{ESC}[1B{ERASE_LINE}{ESC}[J{RESTORE}" + region(rows)
        )
        return True

    def _foreground(self) -> bool:
        """Whether `tm` owns the terminal now (not stopped with Ctrl-Z, not run with `&`)."""
        try:
            return os.tcgetpgrp(self.fd) == os.getpgrp()
        except OSError:
            return False

    def _may_write_in_background(self) -> bool:
        """Whether a line written while not in the foreground is written (the terminal's
        TOSTOP flag off), rather than stopping `tm` with SIGTTOU."""
        try:
            import termios
        except ImportError:
            return False
        try:
            return not termios.tcgetattr(self.fd)[3] & termios.TOSTOP
        except (OSError, termios.error):
            return False

    def _say_off(self) -> None:
        """Once: the status line is off while `tm` is not the terminal's foreground job (run
        under `timeout`, which puts it in a background group, or with `&`), and why; it comes
        back if `tm` is brought to the foreground."""
        if self._off_said:
            return
        self._off_said = True
        if not self._may_write_in_background():
            return
        from rich.text import Text

        self._say(Text.assemble(
            ("trainmeter: ", "bold magenta"),
            "status line off: tm is not this terminal's foreground job (run with & or under a "
            "command such as timeout, which starts it in the background); it draws again in "
            "the foreground, and the dashboard and tm summary have every number"))

    def _draw(self) -> None:
        if self.closed:
            return
        if not self._foreground():
            self._say_off()
            return
        if not self._layout():
            return
        elapsed = run_elapsed(self.snap)
        if elapsed is None:
            elapsed = time.monotonic() - self.t0
        text = status_text(self.snap, max(self.cols - 1, 10), elapsed)
        self.line = text.plain
        self._write(at_row(self.rows, self._render(text)))

    def _say(self, text: Any) -> None:
        """A line of its own in the scrolling part, above the status line."""
        self._write(self._render(text) + "\n")

    def _announce(self, snap: dict[str, Any]) -> None:
        from rich.text import Text

        facts = get_dict(snap, "facts") or {}
        observe = facts.get("observe_only")
        if isinstance(observe, dict) and observe.get("value") and not self._observe_only_said:
            self._observe_only_said = True
            self._say(Text.assemble(("trainmeter: ", "bold magenta"), ("observe-only: ", "bold yellow"),
                                    str(observe["value"])))
        for alert in alerts(snap):
            key = alert.get("key") or (alert.get("kind"), alert.get("message"))
            if key in self._alerted:
                continue
            self._alerted.add(key)
            self._say(Text.assemble(("trainmeter: ", "bold magenta"),
                                    (f"alert {alert.get('kind')}: ", "bold red"),
                                    str(alert.get("message") or "") + alert_numbers(alert)))

    # ---- the observer hooks ------------------------------------------------------------------

    def on_snapshot(self, snap: dict[str, Any], now: float) -> None:
        with self._lock:
            if self.closed:
                return
            self.snap = snap
            self._announce(snap)
            self._draw()

    def on_finish(self, snap: dict[str, Any]) -> None:
        with self._lock:
            if not self.closed:
                self._announce(snap)  # an alert raised by the last snapshot still gets its line
        self.close()

    def close(self) -> None:
        """Give the terminal back: full scroll region, status row erased, cursor where it was."""
        with self._lock:
            if self.closed:
                self._uninstall_winch()
                return
            self.closed = True
            if self.rows:
                try:
                    rows, _ = self._size()
                except OSError:
                    rows = self.rows
                text = f"{SAVE}{RESET_REGION}{ESC}[{rows};1H{ERASE_LINE}"
                if rows != self.rows and 0 < self.rows <= rows:
                    text += f"{ESC}[{self.rows};1H{ERASE_LINE}"
                self._write(text + RESTORE)
        self._uninstall_winch()

    # ---- resize ------------------------------------------------------------------------------

    def _install_winch(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        try:
            self._previous_winch = signal.signal(signal.SIGWINCH, self._on_winch)
            if signal.getsignal(signal.SIGTSTP) is signal.SIG_DFL:
                self._previous_tstp = signal.signal(signal.SIGTSTP, self._on_tstp)
        except (ValueError, OSError, AttributeError):
            pass

    def _uninstall_winch(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for signum, attr in ((signal.SIGWINCH, "_previous_winch"), (signal.SIGTSTP, "_previous_tstp")):
            previous = getattr(self, attr)
            setattr(self, attr, None)
            if previous is None:
                continue
            try:
                signal.signal(signum, previous)
            except (ValueError, OSError, TypeError):
                pass

    def _on_tstp(self, signum: int, frame: Any) -> None:
        """Ctrl-Z: give the shell a whole terminal while stopped, take the row back on `fg`."""
        got = self._lock.acquire(blocking=False)
        try:
            if got and self.rows and not self.closed:
                self._write(f"{SAVE}{RESET_REGION}{ESC}[{self.rows};1H{ERASE_LINE}{RESTORE}")
                self.rows = 0  # the next draw reserves the row again
            signal.signal(signal.SIGTSTP, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTSTP)  # stop here, as without the handler
            # ... continued (fg or bg)
            signal.signal(signal.SIGTSTP, self._on_tstp)
            if got:
                self._draw()  # back in the foreground: draw at once
        except OSError:
            pass
        finally:
            if got:
                self._lock.release()

    def _on_winch(self, signum: int, frame: Any) -> None:
        # Redraw now unless the live thread is drawing (it will see the new size itself).
        if self._lock.acquire(blocking=False):
            try:
                if self.rows and not self.closed:
                    self._draw()
            finally:
                self._lock.release()
        previous = self._previous_winch
        if callable(previous):
            previous(signum, frame)


def wanted(opts: Any, stream: Any) -> bool:
    """On unless -q, and only when the stream is a terminal that can hold a scroll region."""
    from .terminal_console import is_tty

    if getattr(opts, "quiet", False) or not is_tty(stream):
        return False
    return os.environ.get("TERM", "") not in ("", "dumb")


def make(opts: Any, stream: Any) -> LiveStatus | None:
    import sys

    stream = stream or sys.stderr
    if not wanted(opts, stream):
        return None
    from .terminal_console import colour_wanted

    return LiveStatus(stream.fileno(), colour=colour_wanted(stream))
