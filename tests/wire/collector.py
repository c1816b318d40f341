"""A stand-in for `tm`'s ingest: a datagram socket that collects what the agent sends."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from trainmeter import records

REPO = Path(__file__).resolve().parents[2]


class Collector:
    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="tm-test-")
        self.path = os.path.join(self.dir, "ingest.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.sock.settimeout(0.05)
        self.records: list[dict] = []
        self.datagrams = 0
        self._last = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._receive, daemon=True)
        self._thread.start()

    def _receive(self) -> None:
        # Reads while the program runs, as tm's ingest thread does.
        while not self._stop.is_set():
            try:
                data = self.sock.recv(1 << 20)
            except TimeoutError:
                continue
            except OSError:
                return
            self._last = time.monotonic()
            self.datagrams += 1
            for line in data.split(b"\n"):
                self.records.append(records.decode(line))

    def drain(self, quiet_for: float = 0.3) -> list[dict]:
        """Wait until nothing has arrived for `quiet_for` seconds; return all records."""
        while time.monotonic() - self._last < quiet_for:
            time.sleep(0.02)
        return self.records

    def env(self, agent: bool = False) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINMETER_")}
        env["TRAINMETER_SOCKET"] = self.path
        if agent:
            boot = str(REPO / "src" / "trainmeter" / "agent" / "bootstrap")
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [boot, env.get("PYTHONPATH")]))
        return env

    def run(self, code: str, agent: bool = False, **kw) -> subprocess.CompletedProcess:
        result = subprocess.run(
            [sys.executable, "-c", code],
            env=self.env(agent),
            capture_output=True,
            text=True,
            timeout=120,
            **kw,
        )
        self.drain()
        return result

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=1)
        self.sock.close()
        try:
            os.unlink(self.path)
            os.rmdir(self.dir)
        except OSError:
            pass

    def of_kind(self, kind: str) -> list[dict]:
        return [r for r in self.records if r["kind"] == kind]
