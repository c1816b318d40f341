"""The silent-python watcher on real processes: each reason a Python runs without the agent."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from trainmeter.supervisor.agentless import (
    SilentPythonWatcher,
    bootstrap_dir,
    interpreter_flags,
    is_python,
)

SLEEP = "import time; time.sleep(60)"


def agent_env(**extra: str) -> dict[str, str]:
    """What `tm` gives its child: the bootstrap first on PYTHONPATH (no socket needed here)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINMETER_")}
    env["PYTHONPATH"] = bootstrap_dir()
    env.update(extra)
    return env


@pytest.fixture
def spawn() -> Iterator:
    started: list[subprocess.Popen] = []

    def start(argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
        proc = subprocess.Popen(argv, env=env or agent_env(), stdin=subprocess.DEVNULL)
        started.append(proc)
        _wait_for_cmdline(proc.pid)
        return proc

    yield start
    for proc in started:
        proc.kill()
        proc.wait()


def _wait_for_cmdline(pid: int, timeout: float = 30.0) -> None:
    """Wait until /proc shows the new program's arguments: the kernel sets them a moment after
    exec, and a process read before that looks like a Python with no flags (flaky under load)."""
    import psutil

    deadline = time.monotonic() + timeout
    while not psutil.Process(pid).cmdline():
        assert time.monotonic() < deadline, f"pid {pid} shows no command line"
        time.sleep(0.005)


def later(seconds: float = 30.0):
    """A clock that runs ahead, so the grace periods are over without waiting for them."""
    return lambda: time.time() + seconds


def born(pid: int) -> float:
    """The process's start as the watcher reads it: a clock set from it gives the process an
    exact age, however long a loaded machine took to start it or to answer a diagnosis."""
    import psutil

    return psutil.Process(pid).create_time()


def aged(pid: int, seconds: float):
    """A clock at which `pid` is exactly `seconds` old, whenever it is read."""
    start = born(pid)
    return lambda: start + seconds


def watch(watcher: SilentPythonWatcher, tree: list[int], hello: set[int] = frozenset()) -> list:
    """Ticks until the background diagnoses are in (a tick never waits for them itself)."""
    facts = watcher.tick(tree, set(hello))
    watcher.wait_for_diagnoses()
    return facts + watcher.tick(tree, set(hello))


def children_of(pid: int, *, execs: bool = True) -> list[int]:
    """The children of `pid`; with `execs`, once each has exec'd its own program: a child caught
    between fork and exec still shows its parent's command line (the race CI once lost)."""
    import psutil

    parent = psutil.Process(pid).cmdline() if execs else None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        kids = psutil.Process(pid).children()
        try:
            if kids and all(k.cmdline() not in ([], parent) for k in kids):
                return [k.pid for k in kids]
        except psutil.Error:
            pass
        time.sleep(0.02)
    raise AssertionError(f"pid {pid} started no child that exec'd")


# ---- the pure parts ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cmdline", "flags"),
    [
        (["python3", "-uI", "train.py", "-E"], {"u", "I"}),  # -E after the script is the script's
        (["python", "-W", "ignore", "-S", "t.py"], {"S"}),  # -W takes the next word
        (["python", "-Wignore", "-E", "t.py"], {"E"}),
        (["python", "-c", "pass", "-I"], set()),
        (["python", "-Bm", "torch.distributed.run", "-I"], {"B"}),
        (["python", "--check-hash-based-pycs", "never", "-s", "x.py"], {"s"}),
        (["python", "-X", "dev", "-I", "x.py"], {"I"}),
    ],
)
def test_interpreter_flags(cmdline: list[str], flags: set[str]) -> None:
    assert interpreter_flags(cmdline) == flags


def test_is_python() -> None:
    assert is_python("/usr/bin/python3.11", [])
    assert is_python("", ["/venv/bin/python", "x.py"])  # exe unreadable: argv[0] decides
    assert is_python("/opt/py/bin/python3.13t", [])
    assert not is_python("/bin/bash", ["bash", "run.sh"])
    assert not is_python("/usr/bin/pythonista-helper", [])


# ---- real processes ------------------------------------------------------------------------


def test_isolated_python_reported_once(spawn) -> None:
    a = spawn([sys.executable, "-I", "-c", SLEEP])
    b = spawn([sys.executable, "-I", "-c", SLEEP])
    watcher = SilentPythonWatcher(agent_env(), clock=later())
    facts = watch(watcher, [a.pid, b.pid])
    assert len(facts) == 1  # the same reason for both: said once
    (fact,) = facts
    assert fact["key"] == "observe_only" and fact["source"] == "detected"
    assert fact["value"].startswith("python started with -I")
    assert fact["note"].startswith(f"pid {a.pid}: {sys.executable} -I -c")
    assert watcher.tick([a.pid, b.pid], set()) == []


def test_no_site_python(spawn) -> None:
    proc = spawn([sys.executable, "-S", "-c", SLEEP])
    facts = watch(SilentPythonWatcher(agent_env(), clock=later()), [proc.pid])
    assert len(facts) == 1
    assert facts[0]["value"].startswith("python started with -S (no site module")


def test_environment_without_pythonpath(spawn) -> None:
    env = agent_env()
    del env["PYTHONPATH"]
    proc = spawn([sys.executable, "-c", SLEEP], env=env)
    facts = watch(SilentPythonWatcher(agent_env(), clock=later()), [proc.pid])
    assert len(facts) == 1
    assert "did not inherit tm's PYTHONPATH" in facts[0]["value"]


def test_disabled_agent(spawn) -> None:
    proc = spawn([sys.executable, "-c", SLEEP], env=agent_env(TRAINMETER_DISABLE="1"))
    facts = watch(SilentPythonWatcher(agent_env(), clock=later()), [proc.pid])
    assert [f["value"] for f in facts] == [
        "TRAINMETER_DISABLE=1 in its environment: the agent stays off"
    ]


def test_python_without_trainmeter(spawn, bare_venv: Path) -> None:
    python = str(bare_venv / "bin" / "python")
    proc = spawn([python, "-c", SLEEP])
    facts = watch(SilentPythonWatcher(agent_env(), clock=later()), [proc.pid])
    assert len(facts) == 1
    assert facts[0]["value"].startswith(f"trainmeter is not importable from {python}")


def test_python_too_old(spawn, old_python: str) -> None:
    proc = spawn([old_python, "-c", SLEEP])
    facts = watch(SilentPythonWatcher(agent_env(), clock=later()), [proc.pid])
    assert len(facts) == 1
    assert "is older than 3.10" in facts[0]["value"]


def test_what_the_command_line_says_is_said_at_once(spawn, bare_venv: Path) -> None:
    """-I, or an interpreter other than tm's own, cannot change: judged half a second in, not
    after a grace a short run never reaches (issue 27 item 5)."""
    isolated = spawn([sys.executable, "-I", "-c", SLEEP])
    watcher = SilentPythonWatcher(agent_env(), clock=aged(isolated.pid, 0.5))
    (fact,) = watcher.tick([isolated.pid], set())
    assert fact["value"].startswith("python started with -I")
    python = str(bare_venv / "bin" / "python")
    other = spawn([python, "-c", SLEEP])
    (fact,) = watch(SilentPythonWatcher(agent_env(), clock=aged(other.pid, 0.5)), [other.pid])
    assert fact["value"].startswith(f"trainmeter is not importable from {python}")


def test_an_isolated_python_is_judged_at_its_first_tick_without_a_grace(spawn) -> None:
    """Its flag says it all: judged 0.1 s old, on the first tick, nothing asked of it (a short
    `-I` program is explained while it runs, issue 27 item 5; test_observe_only runs it whole)."""
    proc = spawn([sys.executable, "-I", "-c", SLEEP])
    asked: list[str] = []
    watcher = SilentPythonWatcher(
        agent_env(), clock=aged(proc.pid, 0.1), diagnose=lambda exe, env: asked.append(exe) or "why"
    )
    [fact] = watcher.tick([proc.pid], set())
    assert fact["value"].startswith("python started with -I") and asked == []


def test_young_python_of_tms_own_interpreter_waits_for_its_grace(spawn) -> None:
    proc = spawn([sys.executable, "-c", SLEEP])
    asked: list[str] = []
    now = [born(proc.pid) + 0.5]  # not the wall clock: a slow start must not age it past 2 s
    watcher = SilentPythonWatcher(
        agent_env(), clock=lambda: now[0], diagnose=lambda exe, env: asked.append(exe) or "why"
    )
    assert watcher.tick([proc.pid], set()) == []  # just started: it may still say hello
    assert asked == []  # nothing asked of the interpreter yet
    now[0] += 2.0  # 2.5 s old: past the 2 s grace
    watcher.tick([proc.pid], set())
    watcher.wait_for_diagnoses()
    assert [f["value"] for f in watcher.tick([proc.pid], set())] == ["why"]


def test_pythons_that_said_hello_and_their_forks_are_quiet(spawn) -> None:
    # a parent that forks (like a DataLoader worker): the child runs without a new interpreter
    code = "import os, time\nif os.fork() == 0:\n    time.sleep(60)\nelse:\n    time.sleep(60)"
    parent = spawn([sys.executable, "-c", code])
    (child,) = children_of(parent.pid, execs=False)  # a fork: it keeps the parent's argv
    asked: list[str] = []
    watcher = SilentPythonWatcher(
        agent_env(), clock=later(), diagnose=lambda exe, env: asked.append(exe)
    )
    assert watch(watcher, [parent.pid, child], {parent.pid}) == []
    assert asked == []  # judged without asking the interpreter anything


def test_unknown_reason_only_when_nobody_said_hello(spawn) -> None:
    proc = spawn([sys.executable, "-c", SLEEP])  # a Python that would load the agent fine
    # ages from the process's start, not the wall clock: the diagnosis `watch` waits for runs
    # the interpreter, which on a loaded machine took long enough to age it past 10 s
    quiet = SilentPythonWatcher(agent_env(), clock=aged(proc.pid, 5))
    assert watch(quiet, [proc.pid]) == []  # 5 s: not long enough to call it unknown
    late = SilentPythonWatcher(agent_env(), clock=aged(proc.pid, 30))
    (fact,) = watch(late, [proc.pid])
    assert fact["value"].startswith(
        "a Python ran over 10 s without the agent saying hello, for no reason tm can see"
    )
    other = spawn([sys.executable, "-c", SLEEP])
    elsewhere = SilentPythonWatcher(agent_env(), clock=later(30))
    assert watch(elsewhere, [other.pid, proc.pid], {other.pid}) == []


def test_root_that_is_not_python(spawn) -> None:
    shell = spawn(["/bin/sh", "-c", "sleep 60; true"])
    now = [born(shell.pid) + 0.5]  # not the wall clock: a slow start must not age it past 3 s
    watcher = SilentPythonWatcher(agent_env(), clock=lambda: now[0])
    assert watcher.tick([shell.pid], set()) == []
    now[0] += 3.0  # 3.5 s old: past the 3 s grace
    (fact,) = watcher.tick([shell.pid], set())
    assert fact["value"].startswith("the command is not a Python program (sh)")
    assert fact["note"] == f"pid {shell.pid}: /bin/sh -c sleep 60; true"
    assert watcher.tick([shell.pid], set()) == []


def test_shell_root_with_a_python_under_it_is_not_reported(spawn) -> None:
    shell = spawn(["/bin/sh", "-c", f"{sys.executable} -c '{SLEEP}'; true"])
    (python,) = children_of(shell.pid)
    watcher = SilentPythonWatcher(agent_env(), clock=later())
    assert watch(watcher, [shell.pid, python], {python}) == []


def test_shell_root_over_a_silent_python_names_only_the_python(spawn) -> None:
    shell = spawn(["/bin/sh", "-c", f"{sys.executable} -I -c '{SLEEP}'; true"])
    (python,) = children_of(shell.pid)
    watcher = SilentPythonWatcher(agent_env(), clock=later())
    facts = watch(watcher, [shell.pid, python])
    assert [f["value"][:22] for f in facts] == ["python started with -I"]


def test_a_process_without_its_command_line_yet_is_looked_at_again(monkeypatch, spawn) -> None:
    """Right after exec, /proc shows no arguments for a moment: judging then would miss -I (and
    blame the environment); the watcher must look again on the next tick instead."""
    import psutil

    proc = spawn([sys.executable, "-I", "-c", SLEEP])
    real = psutil.Process.cmdline
    calls = {"n": 0}

    def cmdline(self):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        return [] if calls["n"] == 1 else real(self)

    monkeypatch.setattr(psutil.Process, "cmdline", cmdline)
    watcher = SilentPythonWatcher(agent_env(), clock=later())
    assert watcher.tick([proc.pid], set()) == []  # not judged on an empty command line
    facts = watch(watcher, [proc.pid])
    assert [f["value"][:22] for f in facts] == ["python started with -I"]


def test_a_child_caught_before_its_exec_is_looked_at_again(monkeypatch, spawn) -> None:
    """Between a shell's fork and the child's exec, /proc shows the child as a second copy of
    the shell. Judged then, the root would be called "not a Python program" and the child a
    helper, and the child's -I would never be named; the watcher must look again."""
    import psutil

    shell = spawn(["/bin/sh", "-c", f"{sys.executable} -I -c '{SLEEP}'; true"])
    (python,) = children_of(shell.pid)
    real_cmdline, real_exe = psutil.Process.cmdline, psutil.Process.exe
    shell_argv = real_cmdline(psutil.Process(shell.pid))
    shell_exe = real_exe(psutil.Process(shell.pid))
    reads = {"cmdline": 0, "exe": 0}

    def cmdline(self):  # type: ignore[no-untyped-def]
        if self.pid == python:
            reads["cmdline"] += 1
            if reads["cmdline"] == 1:
                return list(shell_argv)  # as read before the exec
        return real_cmdline(self)

    def exe(self):  # type: ignore[no-untyped-def]
        if self.pid == python:
            reads["exe"] += 1
            if reads["exe"] == 1:
                return shell_exe
        return real_exe(self)

    monkeypatch.setattr(psutil.Process, "cmdline", cmdline)
    monkeypatch.setattr(psutil.Process, "exe", exe)
    watcher = SilentPythonWatcher(agent_env(), clock=later())
    assert watcher.tick([shell.pid, python], set()) == []  # neither judged on the fork
    facts = watch(watcher, [shell.pid, python])
    assert [f["value"][:22] for f in facts] == ["python started with -I"]


def test_a_subshell_that_never_execs_does_not_hold_the_root_verdict(spawn) -> None:
    """A pipe's `while` loop stays a fork of the shell for good: after a few looks it is a
    helper like any other, and the root without a Python under it is still reported."""
    shell = spawn(["/bin/sh", "-c", "while true; do sleep 1; done | cat"])
    import psutil

    def looped() -> bool:  # the loop's subshell is there, and `cat` past its exec
        kids = psutil.Process(shell.pid).children()
        try:
            return len(kids) >= 2 and any(k.cmdline() == ["cat"] for k in kids)
        except psutil.Error:
            return False

    deadline = time.monotonic() + 60
    while not looped():
        assert time.monotonic() < deadline, "the pipe's processes did not start"
        time.sleep(0.05)
    watcher = SilentPythonWatcher(agent_env(), clock=later())
    facts: list = []
    for _ in range(6):
        tree = [shell.pid] + [p.pid for p in psutil.Process(shell.pid).children(recursive=True)]
        facts += watcher.tick(tree, set())
    assert [f["value"][:30] for f in facts] == ["the command is not a Python pr"]
