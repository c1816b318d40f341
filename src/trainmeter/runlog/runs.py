"""Finding runs: the one resolver every command uses, and the list of runs under `.trainmeter/runs`.

A person names a run the way they remember it: a directory (or a file inside one), the directory's
name or a unique prefix of it (`20261202-2223`), the run's name (`tiny_gpt`: the newest run of that
name), a unique prefix of a name, or `latest` (the default). Anything else is one clear line that
says what was looked at, never a guess: a prefix that fits two different runs names both.

The list reads each run's `meta.json` and `summary.json`. A run with no `summary.json` (still
running, or killed before writing one) is replayed from its log, so its numbers are there too.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path
from typing import Any

from ..agent.inputs import load_json
from ..payloads import RUN_START
from ..plain import Plain
from ..snapread import finite_value as _number
from ..snapread import get_dict
from .process_start import process_start
from .store import runs_root

STAMP_LEN = len("YYYYmmdd-HHMMSS-")
LATEST = "latest"
#: Logs larger than this are not replayed just to fill a row of `tm runs`.
REPLAY_LIMIT_B = 64 * 1024 * 1024


class RunNotFound(LookupError):
    """No single run matches what the user asked for. The message is the one line they see."""


def _is_run_dir(path: Path) -> bool:
    return path.is_dir() and (path / "events.jsonl").is_file()


def run_dirs(root: Path) -> list[Path]:
    """Run directories under `root`, oldest first (their names start with the UTC time)."""
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if _is_run_dir(p))


def run_name(run_dir: Path) -> str:
    """The name a run was given: the directory name after its time stamp."""
    name = run_dir.name
    stamped = len(name) > STAMP_LEN and name[8] == "-" and name[:8].isdigit()
    return name[STAMP_LEN:] if stamped else name


def _ambiguous(spec: str, matches: list[Path]) -> RunNotFound:
    shown = ", ".join(p.name for p in matches[-4:])
    more = f" and {len(matches) - 4} more" if len(matches) > 4 else ""
    return RunNotFound(f"{spec!r} fits {len(matches)} runs ({shown}{more}): say more of the name")


def resolve_run(spec: str | None = None, cwd: Path | None = None) -> Path:
    """The run directory `spec` names; raises `RunNotFound` with the reason when there is none."""
    root = runs_root(cwd)
    if spec is not None and spec.strip() == "":
        raise RunNotFound("the run name is empty")
    if spec and spec != LATEST:
        path = Path(spec)
        if not path.is_absolute() and cwd is not None:
            path = cwd / path
        if path.is_file() and _is_run_dir(path.parent):
            return path.parent
        if _is_run_dir(path):
            return path
        if path.is_dir() or "/" in spec or os.sep in spec:
            raise RunNotFound(f"{spec} is not a run directory (it has no events.jsonl)")
    runs = run_dirs(root)
    if not runs:
        raise RunNotFound(f"no runs under {root} yet (tm script.py makes one)")
    if not spec or spec == LATEST:
        return runs[-1]
    exact = [p for p in runs if p.name == spec]
    if exact:
        return exact[-1]
    named = [p for p in runs if run_name(p) == spec]
    if named:
        return named[-1]  # the newest run of that name
    by_dir = [p for p in runs if p.name.startswith(spec)]
    if len(by_dir) == 1:
        return by_dir[0]
    if by_dir:
        raise _ambiguous(spec, by_dir)
    by_name = [p for p in runs if run_name(p).startswith(spec)]
    if by_name and len({run_name(p) for p in by_name}) == 1:
        return by_name[-1]
    if by_name:
        raise _ambiguous(spec, by_name)
    raise RunNotFound(f"no run matches {spec!r} under {root} (tm runs lists them)")


# ---- the list -----------------------------------------------------------------------------------


class RunInfo(Plain):
    """One row of `tm runs`: what a run is and its headline numbers (None: not known).

    A plain class, as the dataclass it replaces was (equal by its fields, the snapshot left out
    of its repr): every command resolves its run through this module, and `dataclasses` imports
    `inspect` (~8 ms of `tm summary`'s start; see `plain.py`)."""

    _unshown = ("snapshot",)

    def __init__(self, path: Path, name: str, snapshot: dict[str, Any] | None = None) -> None:
        self.path = path
        self.name = name
        self.start_utc: str | None = None
        self.duration_s: float | None = None
        self.status = "unknown"
        self.steps: float | None = None
        self.tokens: float | None = None
        self.tokens_per_s: float | None = None
        self.mfu: float | None = None
        self.mfu_convention: str | None = None
        self.snapshot: dict[str, Any] = {} if snapshot is None else snapshot



#: meta.json and summary.json are kilobytes; a run directory is another user's to fill
MAX_JSON_BYTES = 64 << 20
_FIRST_LINE_MAX = 1 << 20  # run.start, the log's first line, is a few kilobytes


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = load_json(path, MAX_JSON_BYTES, path.name)
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _first_record(events: Path) -> dict[str, Any] | None:
    try:
        with open(events, "rb") as fh:
            return json.loads(fh.readline(_FIRST_LINE_MAX))
    except (OSError, ValueError):
        return None


def _pid_alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def status_of(meta: dict[str, Any], snap: dict[str, Any], events: Path) -> str:
    """`ok`, `exit N`, `signal N`, `running`, or `no end` (killed before `tm` could close it)."""
    run = get_dict(snap, "run") or {}
    exit_status = meta.get("exit_status", run.get("exit_status"))
    sig = meta.get("signal", run.get("signal"))
    death = get_dict(snap, "death") or {}
    if meta.get("cause") or death.get("text"):  # why it died, in words
        return str(meta.get("cause") or death.get("text"))
    if sig:
        return f"signal {sig}"
    if isinstance(exit_status, int):
        return "ok" if exit_status == 0 else f"exit {exit_status}"
    first = _first_record(events) or {}
    if first.get("kind") == RUN_START.name and _pid_alive(first.get("pid")):
        started = meta.get("tm_process_start")
        if not isinstance(started, int) or process_start(first.get("pid")) in (None, started):
            return "running"  # (a later process given the same pid is not this run's tm)
    return "no end"


def run_info(run_dir: Path, replay_missing: bool = True) -> RunInfo:
    """A run's row, from its summary (or a replay of its log when it has none)."""
    meta = _read_json(run_dir / "meta.json") or {}
    snap = _read_json(run_dir / "summary.json")
    events = run_dir / "events.jsonl"
    if snap is None and replay_missing:
        try:
            if events.stat().st_size <= REPLAY_LIMIT_B:
                from .replay import replay

                snap = replay(events).snapshot
        except OSError:
            snap = None
    snap = snap or {}
    info = RunInfo(path=run_dir, name=str(meta.get("name") or run_name(run_dir)), snapshot=snap)
    info.start_utc = meta.get("start_utc") or _stamp_time(run_dir)
    time_part = get_dict(snap, "time") or {}
    info.duration_s = _number(meta.get("elapsed_s")) or _number(time_part.get("elapsed_s"))
    info.status = status_of(meta, snap, events)
    info.steps = _number(snap.get("steps"))
    info.tokens = _number(snap.get("tokens_seen"))
    info.tokens_per_s = _number(snap.get("tokens_per_s"))
    mfu = snap.get("mfu")
    info.mfu = _number(mfu)
    if isinstance(mfu, dict) and info.mfu is not None:
        info.mfu_convention = mfu.get("convention")
    return info


def _stamp_time(run_dir: Path) -> str | None:
    try:
        when = datetime.strptime(run_dir.name[: STAMP_LEN - 1], "%Y%m%d-%H%M%S")
    except ValueError:
        return None
    return when.strftime("%Y-%m-%dT%H:%M:%S+00:00")


def list_runs(cwd: Path | None = None, replay_missing: bool = True) -> list[RunInfo]:
    """Every run under `.trainmeter/runs`, oldest first."""
    return [run_info(p, replay_missing) for p in run_dirs(runs_root(cwd))]
