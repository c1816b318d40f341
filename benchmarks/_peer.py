"""Where the published peer (trainmeter 0.0.7) lives for side-by-side runs.

Install it once in a scratch venv, beside the same torch:
    python3 -m venv /tmp/peer && /tmp/peer/bin/pip install trainmeter==0.0.7 torch==2.13.0
Set TRAINMETER_PEER_VENV to use another place. Benchmarks run ours alone when it is missing.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PEER_VENV = Path(os.environ.get("TRAINMETER_PEER_VENV", "/tmp/peer"))


def ours() -> list[str]:
    """`tm` as this checkout runs it."""
    return [sys.executable, "-m", "trainmeter"]


def peer() -> list[str] | None:
    tm = PEER_VENV / "bin" / "tm"
    return [str(tm)] if tm.exists() else None


def peer_python() -> str | None:
    python = PEER_VENV / "bin" / "python"
    return str(python) if python.exists() else None


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINMETER_")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def latest_events(cwd: Path) -> list[dict]:
    runs = sorted((cwd / ".trainmeter" / "runs").iterdir())
    out = []
    for line in (runs[-1] / "events.jsonl").read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out
