"""Shared helpers: run `tm` for real in a scratch directory and read what it left."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
T = TypeVar("T")


def tm_env(**extra: str) -> dict[str, str]:
    """The environment a user would have: no trainmeter socket inherited from an outer run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINMETER_")}
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(extra)
    return env


#: Signals the suite sends or relies on: started from a terminal they are at their defaults, but
#: `nohup`, a background job of a script, or a CI runner hands them down ignored, and then the
#: processes a test signals would wait it out. So the test sets them in what it starts.
DEFAULT_SIGNALS = ("SIGINT", "SIGHUP", "SIGQUIT", "SIGTERM", "SIGUSR1", "SIGUSR2", "SIGALRM")


def default_signals() -> None:
    """A `preexec_fn`: the dispositions a process started from a terminal has."""
    for name in DEFAULT_SIGNALS:
        signal.signal(getattr(signal, name), signal.SIG_DFL)


def run_tm(args: list[str], cwd: Path, timeout: float = 240, **kwargs) -> subprocess.CompletedProcess:
    """`tm ARGS` as a child process, as a person would type it (from a terminal: default
    signal dispositions, whatever the suite inherited)."""
    env = kwargs.pop("env", None) or tm_env()
    kwargs.setdefault("preexec_fn", default_signals)
    return subprocess.run(
        [sys.executable, "-m", "trainmeter", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        **kwargs,
    )


def together(*calls: Callable[[], T]) -> list[T]:
    """Each call on its own thread, at once; their results in order (the first error raised).

    For a test's independent processes (its run under the agent and the same program without
    it, two runs it compares): each is mostly one process on one core, so on the suite's 2-core
    box two at a time take about the time of one. Only for runs whose assertions do not time
    anything against the other's (counts, exact losses, records)."""
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        futures = [pool.submit(call) for call in calls]
        return [future.result() for future in futures]


def run_dirs(cwd: Path) -> list[Path]:
    root = cwd / ".trainmeter" / "runs"
    return sorted(p for p in root.iterdir() if p.is_dir()) if root.exists() else []


def latest_summary(cwd: Path) -> dict:
    dirs = run_dirs(cwd)
    assert dirs, f"no run directory under {cwd}"
    return json.loads((dirs[-1] / "summary.json").read_text())


def read_events(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line]


def reserved_port() -> tuple[socket.socket, int]:
    """A free port held for a server the test starts later, and the socket that holds it (close
    it once that server is up). A port found free and let go is anybody's until the server binds
    it: a connection's local port, another test's server. This one stays bound, with
    SO_REUSEADDR and never listening, so the kernel hands it to no `bind(("", 0))` and no
    outgoing connection, while a server that binds it with SO_REUSEADDR (torch's TCPStore,
    Prometheus, `tm`'s own) still can, and a second one listening on it is still refused."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock, sock.getsockname()[1]


PROMETHEUS_LISTENING = re.compile(rb'msg="Listening on" address=127\.0\.0\.1:(\d+)')


def start_prometheus(
    prometheus: str, config: Path, tsdb: Path, log: Path, timeout: float = 60
) -> tuple[subprocess.Popen, int]:
    """A Prometheus on a port the kernel picks (`127.0.0.1:0`), and that port, read from its
    log: no port is chosen free and bound later by another program (anything may take it in
    between). Its log goes to `log` (a file: nobody has to keep reading a pipe)."""
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            [prometheus, f"--config.file={config}", f"--storage.tsdb.path={tsdb}",
             "--web.listen-address=127.0.0.1:0", "--log.level=info"],
            stdout=subprocess.DEVNULL, stderr=fh,
        )
    deadline = time.monotonic() + timeout
    while True:
        found = PROMETHEUS_LISTENING.search(log.read_bytes())
        if found:
            return proc, int(found.group(1))
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise AssertionError("prometheus did not say its port:\n" + log.read_text(errors="replace"))
        time.sleep(0.05)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture(scope="session")
def bare_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A second virtualenv without trainmeter (created from the base interpreter), made once
    for the session and shared by the observe-only tests of the taps and the frameworks."""
    root = tmp_path_factory.mktemp("bare") / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    return root


# ---- the fast lane: `pytest -m "not slow"` --------------------------------------------------

#: Calls that start a process (`tm`, a training script, a Python child): each costs a second or
#: more of interpreter and torch start-up, so a test that makes one is in the slow lane.
PROCESS_STARTERS = (
    "run_tm(", "start_tm(", "tm_cli(", "run_agent(", "run_tiny_lm(", "subprocess.", "Popen(",
    ".run_code(", "spawn(", "os.fork(", "bare_venv", "old_python", "example_run", "Screen(",
    "run_pair(", "run_tiny_lm_pair(", " together(",
)


def _sources(item: pytest.Item) -> list[str]:
    """The test's own source, its fixtures' and the module's helpers it calls by name."""
    import inspect
    import re

    found: list[str] = []

    def add(obj: object) -> str:
        try:
            text = inspect.getsource(obj)  # type: ignore[arg-type]
        except (OSError, TypeError):
            return ""
        found.append(text)
        return text

    text = add(item.function)  # type: ignore[attr-defined]
    for name in set(re.findall(r"\b(\w+)\(", text)):
        helper = getattr(item.module, name, None)  # type: ignore[attr-defined]
        if inspect.isfunction(helper) and helper.__module__ == item.module.__name__:  # type: ignore[attr-defined]
            add(helper)
    for defs in item._fixtureinfo.name2fixturedefs.values():
        add(defs[-1].func)
    return found


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that starts a process is `slow` (the marker's meaning), so the fast lane is the
    in-process tests alone; the full suite (what CI runs) is unchanged."""
    slow = pytest.mark.slow
    for item in items:
        if item.get_closest_marker("slow") is None and hasattr(item, "function"):
            if any(s in text for text in _sources(item) for s in PROCESS_STARTERS):
                item.add_marker(slow)
