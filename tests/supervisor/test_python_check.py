"""`supervisor.python_check`: asking an interpreter whether it would load the agent, and `main`."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from trainmeter.supervisor import python_check as diagnose_python
from trainmeter.supervisor.python_check import diagnose, why_silent


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINMETER_")}
    env.update(extra)
    return env


def test_this_interpreter_loads_the_agent() -> None:
    found = diagnose(sys.executable, clean_env())
    assert found.reason is None
    assert found.version == ".".join(map(str, sys.version_info[:3]))
    assert found.agent is not None and found.agent.endswith(os.path.join("agent", "boot.py"))
    assert why_silent(sys.executable, clean_env()) is None


def test_the_probe_never_reaches_a_live_tm(tmp_path: Path) -> None:
    # a socket path in the environment is dropped for the test run, and the agent is disabled
    env = diagnose_python.probe_env(clean_env(TRAINMETER_SOCKET=str(tmp_path / "s")))
    assert "TRAINMETER_SOCKET" not in env and env["TRAINMETER_DISABLE"] == "1"


def test_another_virtualenv(bare_venv: Path) -> None:
    python = str(bare_venv / "bin" / "python")
    reason = why_silent(python, clean_env())
    assert reason is not None
    assert reason.startswith(f"trainmeter is not importable from {python} (prefix {bare_venv}")


def test_too_old(old_python: str) -> None:
    found = diagnose(old_python, clean_env())
    assert found.version is not None and found.version.startswith("3.")
    assert int(found.version.split(".")[1]) < 10
    assert found.reason == (
        f"Python {found.version} ({old_python}) is older than 3.10, the oldest the agent runs on"
    )


def test_not_there_and_not_python(tmp_path: Path) -> None:
    assert (
        why_silent(str(tmp_path / "nope"), clean_env())
        == f"{tmp_path / 'nope'} does not exist or is not on PATH"
    )
    reason = why_silent("/bin/true", clean_env())  # runs, exits 0, says nothing
    assert reason is not None and reason.startswith("/bin/true is not a Python trainmeter can ask")


def test_disabled_in_the_environment() -> None:
    assert why_silent(sys.executable, clean_env(TRAINMETER_DISABLE="1")) == (
        "TRAINMETER_DISABLE=1 is set in its environment: the agent stays off"
    )


def test_main_for_tm_doctor(capsys, bare_venv: Path, monkeypatch) -> None:
    for name in [k for k in os.environ if k.startswith("TRAINMETER_")]:
        monkeypatch.delenv(name)
    assert diagnose_python.main(["--python", sys.executable]) == 0
    out = capsys.readouterr().out
    assert "verdict: loads the agent" in out
    python = str(bare_venv / "bin" / "python")
    assert diagnose_python.main(["--python", python, "--json"]) == 1
    answer = json.loads(capsys.readouterr().out)
    assert answer["python"] == python
    assert answer["agent"] is None and answer["error"].startswith("ModuleNotFoundError")
    assert answer["reason"].startswith("trainmeter is not importable")
