"""The one stand-in for `tm`'s ingest the agent, wire and tap tests share.

It does what `tm` does with an agent, minus the engine: binds an AF_UNIX datagram socket in a
private temporary directory (short path: socket paths stop at 108 bytes), points
TRAINMETER_SOCKET at it, reads every datagram, and, once the program has ended, reads the agent's
rings beside the socket (`trainmeter.supervisor.ring`) for what the socket never delivered, as
`tm` does before `run.end`. So a test sees what the run log would hold.

Two ways to read: `start()` a thread that receives while a child process runs (then `finish()`),
or call `records()` in the test's own process, which flushes the in-process sender first.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from trainmeter import records
from trainmeter.supervisor import ring, values

REPO = Path(__file__).resolve().parents[1]
BOOTSTRAP = REPO / "src" / "trainmeter" / "agent" / "bootstrap"


class SocketCollector:
    """A bound socket, the records it received, and the rings read after the program ended."""

    def __init__(self, rcvbuf: int = 8 << 20) -> None:
        self.dir = tempfile.mkdtemp(prefix="tmc")
        self.path = os.path.join(self.dir, "s")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.bind(self.path)
        self.sock.setblocking(False)
        self.received: list[dict[str, Any]] = []  # by the socket, in order
        self.recovered: list[dict[str, Any]] = []  # from the rings, after the program ended
        self.delivered = ring.Delivered()
        self.datagrams = 0
        self.value_lines = values.ValueLines()  # the rings' values as tm formats them
        self.last_rx = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ---- receiving ------------------------------------------------------------------------

    def _take(self, data: bytes) -> None:
        self.datagrams += 1
        self.last_rx = time.monotonic()
        lines = self.value_lines.lines(data) if values.is_values(data) else data.split(b"\n")
        for line in lines:
            if line.strip():
                record = records.decode(line)
                self.delivered.see(record)
                self.received.append(record)

    def receive_now(self) -> None:
        """Take every datagram queued now (the test's own thread)."""
        while True:
            try:
                data = self.sock.recv(1 << 20)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            self._take(data)

    def start(self) -> SocketCollector:
        """Receive on a thread while a child process runs, as tm's ingest thread does."""
        self.sock.settimeout(0.05)

        def run() -> None:
            while not self._stop.is_set():
                try:
                    data = self.sock.recv(1 << 20)
                except TimeoutError:
                    continue
                except OSError:
                    return
                self._take(data)

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        return self

    def finish(self) -> list[dict[str, Any]]:
        """After the program ended: stop receiving, drain the socket, read the rings (once)."""
        if self._thread is not None:
            self._stop.set()
            # it looks at the stop flag every 50 ms; a join cut short on a loaded machine would
            # leave it receiving while the drain below does too (records out of order)
            self._thread.join(60)
            assert not self._thread.is_alive(), "the receiving thread did not stop"
            self._thread = None
            self.sock.setblocking(False)
        self.receive_now()
        maps = ring.open_rings(self.dir)
        ring.recover(maps, self.delivered, lambda line, record: self.recovered.append(record))
        return self.all()

    def records(self) -> list[dict[str, Any]]:
        """In-process use: flush this process's sender, then everything received so far."""
        from trainmeter.agent import sender as sender_module

        sender = sender_module.get_sender()
        if sender is not None:
            sender.flush()
        self.receive_now()
        return self.all()

    def all(self) -> list[dict[str, Any]]:
        return self.received + self.recovered

    # ---- running a program under the agent --------------------------------------------------

    def env(self, agent: bool = False, extra_pythonpath: str = "", **extra: str) -> dict[str, str]:
        """The environment `tm` gives its child: the socket, and with `agent` the bootstrap."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINMETER_")}
        env["TRAINMETER_SOCKET"] = self.path
        path = ([str(BOOTSTRAP)] if agent else []) + ([extra_pythonpath] if extra_pythonpath else [])
        if env.get("PYTHONPATH"):
            path.append(env["PYTHONPATH"])
        if path:
            env["PYTHONPATH"] = os.pathsep.join(path)
        env["PYTHONUNBUFFERED"] = "1"
        env.update(extra)
        return env

    def run(
        self, argv: list[str], *, cwd: Path | None = None, timeout: float = 180, **popen: Any
    ) -> subprocess.CompletedProcess[str]:
        """Run `argv` ("python" is this interpreter) to its end, receiving as it goes; then
        read the rings. `env` defaults to `self.env(agent=True)`."""
        if argv and argv[0] == "python":
            argv = [sys.executable, *argv[1:]]
        env = popen.pop("env", None) or self.env(agent=True)
        self.start()
        try:
            result = subprocess.run(
                argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, **popen
            )
        finally:
            self.finish()
        return result

    def run_code(self, code: str, agent: bool = False) -> subprocess.CompletedProcess[str]:
        """`python -c code` with the socket (and with `agent`, the bootstrap)."""
        return self.run(["python", "-c", code], env=self.env(agent=agent))

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.all() if r["kind"] == kind]

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(1)
        self.sock.close()
        shutil.rmtree(self.dir, ignore_errors=True)
