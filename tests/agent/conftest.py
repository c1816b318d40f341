"""Run a real Python process under the agent without `tm`, and collect what it sent.

The test plays the supervisor's ingest part: it binds its own AF_UNIX datagram socket in a
private temporary directory, points TRAINMETER_SOCKET at it, puts the agent's bootstrap on
PYTHONPATH (as `tm` does) and reads every datagram until the process has exited.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
BOOTSTRAP = REPO / "src" / "trainmeter" / "agent" / "bootstrap"
SCRIPTS = Path(__file__).resolve().parent / "scripts"


@dataclass
class AgentRun:
    rc: int
    stdout: str
    stderr: str
    records: list[dict[str, Any]] = field(default_factory=list)

    def kind(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r["kind"] == kind]

    def facts(self) -> dict[str, Any]:
        """The last value of each fact key."""
        return {r["d"]["key"]: r["d"]["value"] for r in self.kind("fact")}

    def fact_records(self, key: str) -> list[dict[str, Any]]:
        return [r for r in self.kind("fact") if r["d"]["key"] == key]

    def steps_total(self, field_name: str) -> int:
        return sum(r["d"].get(field_name, 0) for r in self.kind("step"))

    def probes(self) -> set[str]:
        return {p for r in self.kind("hello") for p in r["d"].get("probes", [])}

    def phase(self, name: str) -> tuple[float, int]:
        rows = [r["d"] for r in self.kind("phase") if r["d"]["name"] == name]
        return sum(d["s"] for d in rows), sum(d["n"] for d in rows)

    def losses(self) -> list[str]:
        return [line.split()[1] for line in self.stdout.splitlines() if line.startswith("LOSS ")]

    def truth(self) -> dict[str, int]:
        for line in self.stdout.splitlines():
            if line.startswith("TRUTH "):
                return {k: int(v) for k, v in (kv.split("=") for kv in line.split()[1:])}
        raise AssertionError(f"no TRUTH line in:\n{self.stdout}\n{self.stderr}")


def agent_env(socket_path: str | None, extra_pythonpath: str = "", **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINMETER_")}
    path = [str(BOOTSTRAP)] + ([extra_pythonpath] if extra_pythonpath else [])
    if env.get("PYTHONPATH"):
        path.append(env["PYTHONPATH"])
    if socket_path is not None:
        env["TRAINMETER_SOCKET"] = socket_path
    else:
        path = path[1:]
    env["PYTHONPATH"] = os.pathsep.join(path)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def run_agent(
    argv: list[str],
    cwd: Path,
    *,
    agent: bool = True,
    timeout: float = 180,
    extra_pythonpath: str = "",
    **extra_env: str,
) -> AgentRun:
    """Run `argv` (a command; "python" is this interpreter) and collect the agent's records."""
    if argv and argv[0] == "python":
        argv = [sys.executable, *argv[1:]]
    sock_dir = tempfile.mkdtemp(prefix="tm-agent-")  # short: AF_UNIX paths are limited
    path = os.path.join(sock_dir, "ingest")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.bind(path)
    sock.settimeout(0.1)
    datagrams: list[bytes] = []
    done = threading.Event()

    def read() -> None:
        while True:
            try:
                datagrams.append(sock.recv(1 << 20))
            except TimeoutError:
                if done.is_set():
                    return
            except OSError:
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        env = agent_env(path if agent else None, extra_pythonpath, **extra_env)
        proc = subprocess.run(
            argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
        )
    finally:
        done.set()
        reader.join(5)
        sock.close()
        shutil.rmtree(sock_dir, ignore_errors=True)
    records = [json.loads(line) for d in datagrams for line in d.split(b"\n") if line]
    return AgentRun(proc.returncode, proc.stdout, proc.stderr, records)


def run_tiny_lm(cwd: Path, *flags: str, agent: bool = True, **env: str) -> AgentRun:
    return run_agent(["python", str(SCRIPTS / "tiny_lm.py"), *flags], cwd, agent=agent, **env)
