"""Run a real Python process under the agent without `tm`, and collect what it sent.

The test plays the supervisor's ingest part with the shared `tests.socket_collector`: a socket in
a private temporary directory, TRAINMETER_SOCKET pointing at it, the agent's bootstrap on
PYTHONPATH (as `tm` does), every datagram read until the process has exited, then the rings.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from tests.conftest import together
from tests.socket_collector import SocketCollector

REPO = Path(__file__).resolve().parents[2]
BOOTSTRAP = REPO / "src" / "trainmeter" / "agent" / "bootstrap"
SCRIPTS = Path(__file__).resolve().parent / "scripts"
T = TypeVar("T")


@pytest.fixture
def collector(monkeypatch: pytest.MonkeyPatch) -> Iterator[SocketCollector]:
    """This process's sender, new, pointed at a test socket; it ships only when the test
    flushes it by hand, and goes quiet when the test ends."""
    from trainmeter.agent import outbox
    from trainmeter.agent import sender as sender_module

    col = SocketCollector()
    monkeypatch.setenv(sender_module.SOCKET_ENV, col.path)
    monkeypatch.setattr(sender_module, "_sender", None)
    monkeypatch.setattr(sender_module, "_sender_checked", False)
    outbox.clear()
    sender = sender_module.get_sender()
    sender.interval = 3600.0  # the test flushes by hand
    try:
        yield col
    finally:
        sender.go_quiet()
        outbox.clear()
        col.close()


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
    """Run `argv` (a command; "python" is this interpreter) and collect what the agent sent,
    plus what its rings kept after the process ended (as `tm` logs it)."""
    collector = SocketCollector()
    try:
        env = agent_env(collector.path if agent else None, extra_pythonpath, **extra_env)
        proc = collector.run(argv, cwd=cwd, env=env, timeout=timeout)
        return AgentRun(proc.returncode, proc.stdout, proc.stderr, collector.all())
    finally:
        collector.close()


def run_tiny_lm(cwd: Path, *flags: str, agent: bool = True, **env: str) -> AgentRun:
    return run_agent(["python", str(SCRIPTS / "tiny_lm.py"), *flags], cwd, agent=agent, **env)


def run_pair(
    argv: list[str], cwd: Path, *, agent_pythonpath: str = "", **extra_env: str
) -> tuple[AgentRun, AgentRun]:
    """`argv` under the agent and the same command without it, at once (two processes on the
    box's two cores: the time of one); the plain run in `cwd/plain`, so that what a program
    writes to its working directory (a checkpoint) is never written by both at the same time.
    `agent_pythonpath` goes to the agent's run alone (a test's sitecustomize that breaks it)."""
    plain_cwd = cwd / "plain"
    plain_cwd.mkdir(exist_ok=True)
    run, plain = together(
        lambda: run_agent(argv, cwd, extra_pythonpath=agent_pythonpath, **extra_env),
        lambda: run_agent(argv, plain_cwd, agent=False, **extra_env),
    )
    return run, plain


def run_tiny_lm_pair(cwd: Path, *flags: str, **kw: str) -> tuple[AgentRun, AgentRun]:
    """`tiny_lm.py FLAGS` under the agent and without it, at once (see run_pair)."""
    return run_pair(["python", str(SCRIPTS / "tiny_lm.py"), *flags], cwd, **kw)


def runs_two_at_a_time(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    runs: dict[str, Callable[[Path], T]],
) -> dict[str, T]:
    """A module's single runs, test name -> run, made two at a time when first asked for.

    For tests that each read one process of their own (its counts, facts, losses and log;
    nothing timed): one process uses one of the suite's two cores, so made one test after the
    other they leave the second idle. A name is a test's function name or, for one case of a
    parametrized test, its item name (`test_x[a-b]`). Only the runs of the tests selected are
    made, each in a directory of its own (the call's argument)."""
    selected: set[str] = set()
    for item in request.session.items:
        if getattr(item, "module", None) is request.module:
            selected.update((item.name, getattr(item, "originalname", item.name)))
    todo = {name: call for name, call in runs.items() if name in selected}
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {
            name: pool.submit(call, tmp_path_factory.mktemp(re.sub(r"\W", "_", name[5:40])))
            for name, call in todo.items()
        }
        return {name: future.result() for name, future in futures.items()}


@pytest.fixture(scope="module")
def singles(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The module's `SINGLES` (test name -> how its one run is made), made two at a time
    (`runs_two_at_a_time`)."""
    return runs_two_at_a_time(request, tmp_path_factory, request.module.SINGLES)


@pytest.fixture
def run(request: pytest.FixtureRequest, singles: dict[str, Any]) -> Any:
    """This test's run of its module's `SINGLES`: by its item name for one case of a
    parametrized test, else by its function name."""
    node = request.node
    return singles[node.name] if node.name in singles else singles[node.originalname]
