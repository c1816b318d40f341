"""Would this Python interpreter load trainmeter's agent? And if not, why not.

`tm` puts its agent into every Python it starts through a `sitecustomize` on PYTHONPATH; the
`sitecustomize` imports `trainmeter.agent.boot` from the interpreter it runs in. That import is
what fails silently in another virtualenv, a container's own Python, or a Python too old for the
agent, and the run is then watched from outside only. The only honest way to know is to ask the
interpreter itself, so `diagnose` runs it once (`<python> -c ...`) with the environment it would
have, and reads back its version and whether the import worked. It never touches a running
process: the supervisor's watcher and `tm doctor --python PATH` both call it with a path.

    why_silent("/opt/other-venv/bin/python", os.environ)  # -> reason text, or None
    main(["--python", "/opt/other-venv/bin/python"])      # what `tm doctor --python` prints
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from ..records import ENV_DISABLE, ENV_SOCKET

MIN_VERSION = (3, 10)
TIMEOUT_S = 30.0

# Runs in the interpreter under test, which may be any Python (2.7 included): no f-strings, no
# annotations, the answer on the last line of stdout whatever its own start-up printed before.
_PROBE = r"""
import json, sys
out = {"version": list(sys.version_info[:3]), "executable": sys.executable,
       "prefix": sys.prefix}
try:
    import trainmeter.agent.boot as boot
    out["agent"] = boot.__file__
except BaseException as exc:
    out["error"] = "%s: %s" % (type(exc).__name__, exc)
sys.stdout.write("\n" + json.dumps(out) + "\n")
"""


@dataclass
class Diagnosis:
    """What the interpreter said about itself, and the verdict (`reason` None: it loads)."""

    python: str
    version: str | None = None
    executable: str | None = None
    prefix: str | None = None
    agent: str | None = None  # where trainmeter.agent.boot was found
    error: str | None = None  # why importing it failed
    reason: str | None = None


def probe_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment for the test run: the process's own, minus any way to reach a `tm`.

    Without TRAINMETER_SOCKET the agent a `sitecustomize` may start stays a no-op, so the test
    run never says hello to a live supervisor; TRAINMETER_DISABLE makes sure of it.
    """
    clean = {k: v for k, v in env.items() if k != ENV_SOCKET}
    clean[ENV_DISABLE] = "1"
    clean.setdefault("PYTHONIOENCODING", "utf-8")
    return clean


def resolve(python: str) -> str | None:
    """A path for `python` ("python3" is looked up on PATH); None when there is none."""
    if os.sep in python:
        return python if os.path.exists(python) else None
    return shutil.which(python)


def diagnose(python: str, env: Mapping[str, str] | None = None) -> Diagnosis:
    """Run `python` once and judge whether trainmeter's agent would load in it."""
    env = os.environ if env is None else env
    result = Diagnosis(python=python)
    if env.get(ENV_DISABLE) == "1":
        result.reason = "TRAINMETER_DISABLE=1 is set in its environment: the agent stays off"
        return result
    exe = resolve(python)
    if exe is None:
        result.reason = f"{python} does not exist or is not on PATH"
        return result
    try:
        done = subprocess.run(
            [exe, "-c", _PROBE],
            env=probe_env(env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        result.reason = f"{exe} did not answer within {TIMEOUT_S:.0f} s"
        return result
    except OSError as exc:
        result.reason = f"{exe} could not be run: {exc.strerror or exc}"
        return result
    answer = _last_json_line(done.stdout)
    if answer is None:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1][:160]
        result.reason = f"{exe} is not a Python trainmeter can ask (exit {done.returncode}: {last})"
        return result
    version = tuple(int(x) for x in answer.get("version", [])[:3])
    result.version = ".".join(str(x) for x in version)
    result.executable = answer.get("executable")
    result.prefix = answer.get("prefix")
    result.agent = answer.get("agent")
    result.error = answer.get("error")
    result.reason = _verdict(exe, version, result)
    return result


def _verdict(exe: str, version: tuple[int, ...], d: Diagnosis) -> str | None:
    if version[:2] < MIN_VERSION:
        need = ".".join(map(str, MIN_VERSION))
        return f"Python {d.version} ({exe}) is older than {need}, the oldest the agent runs on"
    if d.error is None:
        return None
    if d.error.startswith(("ModuleNotFoundError", "ImportError: No module named")) and (
        "trainmeter" in d.error
    ):
        return (
            f"trainmeter is not importable from {exe} (prefix {d.prefix}: another virtualenv "
            "or interpreter); install trainmeter there, or run the command with the Python "
            f"that has it ({sys.executable})"
        )
    return f"trainmeter's agent fails to import in {exe}: {d.error}"


def _last_json_line(stdout: str) -> dict | None:
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                return None
            return value if isinstance(value, dict) else None
    return None


def why_silent(python_exe: str, env: Mapping[str, str] | None = None) -> str | None:
    """The reason `python_exe` would run without trainmeter's agent, or None when it loads it."""
    return diagnose(python_exe, env).reason


def main(argv: list[str] | None = None) -> int:
    """`tm doctor --python PATH`: 0 when the agent loads there, 1 with the reason when not."""
    parser = argparse.ArgumentParser(
        prog="tm doctor --python", description="Would this Python load trainmeter's agent?"
    )
    parser.add_argument("--python", default=sys.executable, help="interpreter path or name")
    parser.add_argument("--json", action="store_true", help="print the diagnosis as JSON")
    args = parser.parse_args(argv)
    found = diagnose(args.python, os.environ)
    if args.json:
        print(json.dumps(asdict(found), indent=2))
    else:
        print(f"python: {found.executable or found.python}")
        if found.version:
            print(f"version: {found.version}")
        if found.agent:
            print(f"agent: {found.agent}")
        if found.reason is None:
            print("verdict: loads the agent; tm sees steps, tokens and loss in it")
        else:
            print(f"verdict: observe only: {found.reason}")
    return 0 if found.reason is None else 1


if __name__ == "__main__":
    sys.exit(main())
