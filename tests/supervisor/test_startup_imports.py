"""What every run's start-up imports, pinned by module name (a count that cannot drift with the
machine's load, where a timing would): the modules an empty script under `tm` never needs cost
milliseconds in `tm` before the child starts and in every Python the run starts.

- `tm` before the child starts: what `cli/run.py` and `supervisor/session.py` import.
- the agent's start in the training process: what `sitecustomize` (the hello, the ring, the
  sender's thread, the taps armed, the crash hooks) imports, read in that process at its exit.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

import trainmeter

from ..conftest import tm_env

#: Not before the child starts: each was once there, with its cost on the box it was measured on.
TM_NOT_BEFORE_THE_CHILD = {
    "tempfile": "the socket directory's name (4 ms with shutil and random)",
    "shutil": "which() only for a bare program name (2 ms)",
    "pathlib": "cli.runarg's port_number (4 ms with urllib.parse, ipaddress)",
    "typing": "annotations only (2.5 ms)",
    "socket": "the C module _socket does (1.3 ms: enum classes, array)",
    "dataclasses": "runlog.runs for process_start (7 ms with inspect)",
    "hashlib": "the log's hash: _sha256 (OpenSSL's load, 3 ms)",
    "decimal": "readable.fixed_places works in integers",
    "trainmeter.redact": "compiled patterns, at run.start's time",
    "trainmeter.visible": "imported at the first warning",
}
#: Not in `tm` at all while it runs an empty script, its end included (its last snapshot, the
#: summary, the checkpoint): a live run's `tm` never decodes a log.
TM_NOT_IN_A_RUN = {
    "msgspec": "a replay's typed decoding; the finiteness check once took it up (~19 ms with "
    "typing_extensions, inspect, uuid and decimal) at tm's end",
    "typing_extensions": "msgspec's, and nothing else's",
    "inspect": "typing_extensions' (8 ms with dis, tokenize, ast)",
}
#: Not in a Python the run starts, until its own code asks for them.
AGENT_NOT_AT_START = {
    "threading": "the sender's thread and the locks are _thread's (3 ms with collections, functools)",
    "collections": "_collections.deque",
    "functools": "the taps import it when they wrap a tracker",
    "contextlib": "try/except in the ring",
    "socket": "the sender uses _socket (4 ms: enum, selectors)",
    "enum": "socket.py's",
    "importlib.util": "sitecustomize's chain uses importlib._bootstrap's module_from_spec",
    "typing": "annotations only",
    "json": "records.encode does not need it at start",
}

BEFORE_THE_CHILD = """
import sys
before = set(sys.modules)
import trainmeter.cli.run, trainmeter.supervisor.session
print(" ".join(sorted(set(sys.modules) - before)))
"""

AT_EXIT = """
import atexit, sys
atexit.register(lambda: print(" ".join(sorted(sys.modules))))
"""


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> set[str]:
    out = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return set(out.stdout.split())


@pytest.mark.slow
def test_tm_imports_only_what_starting_the_child_needs(tmp_path: Path) -> None:
    loaded = _run([sys.executable, "-c", BEFORE_THE_CHILD], tm_env(), tmp_path)
    assert "trainmeter.supervisor.launcher" in loaded and "subprocess" in loaded  # it did run
    assert {name for name in TM_NOT_BEFORE_THE_CHILD if name in loaded} == set()


@pytest.mark.slow
def test_tm_running_an_empty_script_imports_no_decoder(tmp_path: Path) -> None:
    """The whole `tm` process, start to end, read from `-X importtime` (the child does not
    inherit the flag, and an empty script writes nothing else to stderr)."""
    (tmp_path / "empty.py").write_text("")
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "trainmeter", "-q", "--no-web", "empty.py"],
        env=tm_env(), cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    loaded = {
        line.rsplit("|", 1)[1].strip()
        for line in out.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "trainmeter.supervisor.ending" in loaded  # it did run to its end
    assert {name for name in TM_NOT_IN_A_RUN if name in loaded} == set()


@pytest.mark.slow
def test_the_agent_starts_without_threading_socket_or_collections(tmp_path: Path) -> None:
    bootstrap = Path(trainmeter.__file__).parent / "agent" / "bootstrap"
    sink = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    path = tmp_path / "ingest.sock"
    sink.bind(str(path))
    try:
        (tmp_path / "empty.py").write_text(AT_EXIT)
        env = tm_env(PYTHONPATH=str(bootstrap), TRAINMETER_SOCKET=str(path))
        loaded = _run([sys.executable, "empty.py"], env, tmp_path)
        sink.settimeout(10)
        hello = sink.recv(1 << 20)
    finally:
        sink.close()
    assert "trainmeter.agent.boot" in loaded and "trainmeter.agent.ring" in loaded  # it started
    assert b'"kind":"hello"' in hello  # and said hello, from its thread or its exit flush
    assert {name for name in AGENT_NOT_AT_START if name in loaded} == set()
