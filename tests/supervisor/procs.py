"""Helpers for tests that run `tm` for real: child scripts that talk to the ingest socket or wait
for signals, and a way to start `tm` in its own session so signals can be sent to its group."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import termios
import textwrap
import time
from pathlib import Path

from ..conftest import default_signals, tm_env


def write_script(path: Path, body: str) -> Path:
    path.write_text(textwrap.dedent(body))
    return path


def step_record(n: int, t: float, tokens: int = 1024, k: int = 1) -> dict:
    return {
        "v": 1, "t": t, "src": "agent", "rank": 0, "pid": 4242, "kind": "step",
        "d": {"k": k, "tokens": tokens, "n": n, "micro": 1},
    }


# A child that sends a few step and metric records, as an agent would, then garbage lines.
SENDER = """
import json, os, socket, time
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
s.sendto("\\n".join(lines[:20]).encode(), path)
s.sendto("\\n".join(lines[20:]).encode(), path)
s.sendto(b"this is not json\\n{\\"v\\": 1, \\"kind\\": \\"nope\\"}", path)
print("sent", len(lines))
"""


def start_tm(args: list[str], cwd: Path, **kwargs) -> subprocess.Popen:
    """`tm ARGS` in a new session (its own process group), so the test can signal the group
    the way a terminal does, without hitting pytest. Signals at their defaults, as from a
    terminal, however the suite was started."""
    kwargs.setdefault("preexec_fn", default_signals)
    return subprocess.Popen(
        [sys.executable, "-m", "trainmeter", *args],
        cwd=cwd,
        env=kwargs.pop("env", None) or tm_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        **kwargs,
    )


def start_tm_on_terminal(args: list[str], cwd: Path) -> tuple[subprocess.Popen, int]:
    """`tm ARGS` in a new session whose controlling terminal is a fresh pty (its stdin), with
    `tm` the terminal's foreground group: writing Ctrl-C to the returned master fd signals the
    group exactly as a person's keyboard does. The caller closes the fd."""
    master, slave = os.openpty()

    def on_terminal() -> None:
        default_signals()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    try:
        proc = start_tm(args, cwd, stdin=slave, preexec_fn=on_terminal)
    finally:
        os.close(slave)
    return proc, master


def ctrl_c(master: int) -> None:
    os.write(master, b"\x03")


def wait_for(path: Path, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} did not appear within {timeout}s")
        time.sleep(0.02)


def kinds(events: list[dict]) -> list[str]:
    return [e["kind"] for e in events]


def facts(events: list[dict], key: str) -> list[dict]:
    return [e["d"] for e in events if e["kind"] == "fact" and e["d"].get("key") == key]


def dumps(obj: object) -> str:
    return json.dumps(obj, sort_keys=True)
