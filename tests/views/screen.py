"""A real terminal for the terminal views' tests: a tmux pane of a fixed size on a private server.

tmux is a full terminal emulator: `capture-pane` gives the screen a person would see (after every
escape sequence was applied), and `pipe-pane` the raw bytes the programs wrote. Each `Screen` runs
its own tmux server (`-L` a unique socket name), so tests never see another's panes.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

TMUX = shutil.which("tmux")
needs_tmux = pytest.mark.skipif(TMUX is None, reason="tmux is not installed")


class Screen:
    def __init__(self, workdir: Path, cols: int = 100, rows: int = 14) -> None:
        self.socket = f"tmtest-{uuid.uuid4().hex[:12]}"
        self.workdir = workdir
        self.cols, self.rows = cols, rows
        self.raw = workdir / f"{self.socket}.raw"
        self._tmux(
            "-f", "/dev/null", "new-session", "-d", "-s", "t", "-x", str(cols), "-y", str(rows),
            "-c", str(workdir), "env -i PATH=/usr/bin:/bin HOME=" + str(workdir)
            + " TERM=xterm-256color PS1='$ ' bash --norc --noprofile",
        )
        self._tmux("set-option", "-g", "status", "off")
        self._tmux("set-option", "-g", "history-limit", "2000")
        self._tmux("pipe-pane", "-t", "t", "-o", f"cat >> {shlex.quote(str(self.raw))}")

    def _tmux(self, *args: str) -> str:
        result = subprocess.run(
            [TMUX or "tmux", "-L", self.socket, *args],
            capture_output=True,
            text=True,
            timeout=10,
            env={**os.environ, "TMUX": ""},
        )
        if result.returncode != 0:
            raise AssertionError(f"tmux {args[0]} failed: {result.stderr.strip()}")
        return result.stdout

    def type(self, line: str) -> None:
        """Type a line at the shell prompt, then Enter."""
        self._tmux("send-keys", "-t", "t", "-l", line)
        self._tmux("send-keys", "-t", "t", "Enter")

    def keys(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", "t", *keys)

    def resize(self, cols: int, rows: int) -> None:
        self._tmux("resize-window", "-t", "t", "-x", str(cols), "-y", str(rows))
        self.cols, self.rows = cols, rows

    def shell_children(self) -> list[int]:
        """The pids of the processes the pane's shell started (its foreground command)."""
        shell = int(self._tmux("list-panes", "-t", "t", "-F", "#{pane_pid}").split()[0])
        children = Path(f"/proc/{shell}/task/{shell}/children")
        return [int(p) for p in children.read_text().split()] if children.exists() else []

    def lines(self) -> list[str]:
        """The visible screen, one string a row (trailing blanks trimmed), all `rows` of them."""
        text = self._tmux("capture-pane", "-p", "-t", "t")
        rows = [line.rstrip() for line in text.split("\n")]
        rows = rows[: self.rows] + [""] * (self.rows - len(rows))
        return rows

    def frame(self) -> tuple[list[str], tuple[int, int]]:
        """The visible screen (as `lines`) and the cursor's column and row, read by one tmux
        command: nothing the pane's program writes is applied between the two reads."""
        out = self._tmux(
            "capture-pane", "-p", "-t", "t", ";",
            "display-message", "-p", "-t", "t", "#{cursor_x} #{cursor_y}",
        )
        text, _, cursor = out.rstrip("\n").rpartition("\n")
        x, y = (int(v) for v in cursor.split())
        rows = [line.rstrip() for line in text.split("\n")]
        return rows[: self.rows] + [""] * (self.rows - len(rows)), (x, y)

    def wait_for_frame(
        self, test: Callable[[list[str]], bool], timeout: float = 60.0, what: str = ""
    ) -> list[str]:
        """`wait_for` for a full-screen program (`tm top`): the screen once a whole frame passes
        `test`. A frame is one write of some 6 kB, which the kernel hands the terminal in 2 kB
        pieces; a screen read between two pieces shows the new frame's top rows over blank
        rows (or the last frame's) below, so a test of the title alone can pass on a frame half
        drawn (1 read in 30 here on a loaded machine). A frame drawn to its end leaves the
        cursor after the bottom row's last column."""
        deadline = time.monotonic() + timeout
        while True:
            lines, cursor = self.frame()
            if cursor == (self.cols, self.rows - 1) and test(lines):
                return lines
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the screen never showed a whole frame with {what or test} (cursor at "
                    f"{cursor}); it shows:\n" + "\n".join(lines)
                )
            time.sleep(0.05)

    def history(self) -> str:
        """Everything the pane showed, scrolled-off lines included."""
        return self._tmux("capture-pane", "-p", "-t", "t", "-S", "-")

    def text(self) -> str:
        return "\n".join(self.lines())

    def wait_for(self, test: Callable[[list[str]], bool], timeout: float = 60.0, what: str = "") -> list[str]:
        deadline = time.monotonic() + timeout
        while True:
            lines = self.lines()
            if test(lines):
                return lines
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the screen never showed {what or test}; it shows:\n" + "\n".join(lines)
                )
            time.sleep(0.05)

    def raw_bytes(self) -> bytes:
        return self.raw.read_bytes() if self.raw.exists() else b""

    def raw_through(self, marker: bytes, timeout: float = 60.0, what: str = "") -> bytes:
        """The raw bytes once they hold `marker` (the last bytes of interest a program wrote):
        they reach the file through a pipe and a `cat`, behind the screen, so a screen read
        that shows a program's end can come before the file has its last bytes (a loaded
        box's `cat` is late: a test read the status line's last draw without the reset after
        it)."""
        deadline = time.monotonic() + timeout
        while True:
            raw = self.raw_bytes()
            if marker in raw:
                return raw
            if time.monotonic() > deadline:
                raise AssertionError(f"the pane's bytes never held {what or marker!r}: {raw[-300:]!r}")
            time.sleep(0.05)

    def close(self) -> None:
        subprocess.run(
            [TMUX or "tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=10
        )


def shell_env(**extra: str) -> str:
    """`VAR=value ...` for the shell line: the variables `tm` needs inside the clean pane."""
    import sys

    keep = {
        k: v
        for k, v in os.environ.items()
        if k in ("PATH", "HOME", "LANG", "LC_ALL", "PYTHONPATH", "VIRTUAL_ENV")
    }
    keep.setdefault("LANG", "C.UTF-8")
    keep["PATH"] = os.path.dirname(sys.executable) + os.pathsep + keep.get("PATH", "/usr/bin:/bin")
    keep["PYTHONUNBUFFERED"] = "1"
    keep.update(extra)
    return " ".join(f"{k}={shlex.quote(v)}" for k, v in keep.items())
