"""Why a run died, in words, from the records: `crash` (an uncaught exception told by the agent,
or a native crash whose stacks `tm` found), and `run.end` (exit status, signal, whether `tm`
passed the signal on from outside, the OOM killer's count during the run).

The cause is chosen in this order, the most specific first:

1. the OOM killer's count rose during the run            "killed by the OOM killer"
2. a native crash left faulthandler's stacks              "crashed in native code: Segmentation fault (rank 1)"
3. an uncaught exception on a rank (the earliest)         "crashed: CUDA out of memory (rank 3)"
4. a signal (from outside when `tm` passed it on)         "preempted (SIGTERM)", "signal 1 (SIGHUP)"
   after no step for STUCK_FACTOR times the usual interval: "hung 12m00s, then ..."
5. a failing exit status and nothing else                 "exit 2"

A run whose command exited 0 has no `death`. Pure: text and numbers in, a dict out.
"""

from __future__ import annotations

import re
from typing import Any

from ..readable import duration
from .alerts import STUCK_FACTOR, STUCK_MIN_S

_SIZE = r"([\d.]+ (?:[KMGT]i)?B)"
_OOM_FIELDS = (
    ("tried_b", rf"Tried to allocate {_SIZE}"),
    ("total_b", rf"total capacity of {_SIZE}"),
    ("free_b", rf"of which {_SIZE} is free"),
    ("in_use_b", rf"this process has {_SIZE} memory in use"),
    ("allocated_b", rf"{_SIZE} is allocated by PyTorch"),
    ("reserved_unallocated_b", rf"{_SIZE} is reserved by PyTorch but unallocated"),
)
_UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
_NCCL_OP = re.compile(r"OpType=(\w+)")
_TIMEOUT_WORDS = ("timed out", "timeout", "time out")
#: what a signal sent from outside the run means, by the signal's name
_OUTSIDE = {"SIGTERM": "preempted", "SIGKILL": "killed"}


def _bytes(text: str) -> int | None:
    number, _, unit = text.partition(" ")
    try:
        return int(float(number) * _UNITS[unit])
    except (ValueError, KeyError):
        return None


def signal_name(number: int) -> str:
    """The plain name of a signal number where Python knows it."""
    # imported here: only a run a signal ended names one, and `signal` builds its enums (~0.5 ms
    # of every replay's start)
    import signal

    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def out_of_memory(message: str) -> dict[str, Any] | None:
    """The sizes PyTorch's CUDA out-of-memory error reports, or None if it is not one."""
    if "CUDA out of memory" not in message and "out of memory" not in message.lower():
        return None
    found: dict[str, Any] = {}
    for name, pattern in _OOM_FIELDS:
        m = re.search(pattern, message)
        if m:
            value = _bytes(m.group(1))
            if value is not None:
                found[name] = value
    gpu = re.search(r"GPU (\d+) has a total capacity", message)
    if gpu:
        found["gpu"] = int(gpu.group(1))
    return found


def _timeout(d: dict[str, Any]) -> dict[str, Any] | None:
    """A collective that timed out: its backend and name, or None."""
    message = str(d.get("message") or "")
    lower = message.lower()
    if not any(w in lower for w in _TIMEOUT_WORDS):
        return None
    op = _NCCL_OP.search(message)
    backend = "nccl" if ("nccl" in lower or op) else "gloo" if "gloo" in lower else None
    collective = op.group(1).lower() if op else d.get("collective")
    if backend is None and collective is None:
        return None
    return {"backend": backend, "collective": collective}


def launcher_root_cause(message: str) -> dict[str, Any] | None:
    """torchrun's failure report (ChildFailedError): the rank and exit code of its root cause."""
    part = message.split("Root Cause", 1)[-1]
    rank = re.search(r"rank\s*:\s*(\d+)", part)
    code = re.search(r"exitcode\s*:\s*(-?\d+)", part)
    if not rank or not code:
        return None
    return {"rank": int(rank.group(1)), "exitcode": int(code.group(1))}


def _exception_text(d: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    message = str(d.get("message") or "")
    kind = str(d.get("type") or "error")
    extra: dict[str, Any] = {}
    if kind.endswith("ChildFailedError"):
        root = launcher_root_cause(message)
        if root is not None:
            extra["launcher"] = root
            code = root["exitcode"]
            how = f"signal {-code} ({signal_name(-code)})" if code < 0 else f"exit {code}"
            return f"a worker failed, {how}", extra
    oom = out_of_memory(message) if "OutOfMemory" in kind or "out of memory" in message else None
    if oom is not None:
        extra["oom"] = oom
        return "CUDA out of memory" if "CUDA" in message else "out of memory", extra
    timeout = _timeout(d)
    if timeout is not None:
        extra["timeout"] = timeout
        what = " ".join(x for x in (timeout["backend"], "timeout") if x)
        return what + (f" in {timeout['collective']}" if timeout.get("collective") else ""), extra
    first = message.strip().splitlines()[0] if message.strip() else ""
    short = kind.rsplit(".", 1)[-1]
    return f"{short}: {first[:160]}" if first else short, extra


class DeathRecords:
    """Keeps the `crash` records; `section` composes the cause once the run has ended."""

    def __init__(self) -> None:
        self.crashes: list[dict[str, Any]] = []

    def crash(self, record: dict[str, Any], d: dict[str, Any], t: float) -> None:
        rank = d.get("rank") if record.get("src") == "tm" else record.get("rank")
        self.crashes.append({**d, "t": t, "rank": rank if isinstance(rank, int) else None,
                             "pid": d.get("pid") or record.get("pid")})

    def _first(self, native: bool) -> dict[str, Any] | None:
        found = [c for c in self.crashes if bool(c.get("native")) is native]
        if not found:
            return None
        ranked = [c for c in found if c["rank"] is not None]  # a rank's, before a launcher's
        return min(ranked or found, key=lambda c: c["t"])

    def section(
        self,
        run: dict[str, Any],
        ended: bool,
        last_step_t: float | None,
        t_end: float | None,
        interval_s: float | None,
    ) -> dict[str, Any] | None:
        """The `death` entry, or None for a run that has not ended or ended well."""
        status, sig = run.get("exit_status"), run.get("signal")
        if not ended or (status in (0, None) and not sig):
            return None
        out: dict[str, Any] = {"exit_status": status}
        if sig:
            out["signal"] = sig
            out["signal_name"] = signal_name(sig)
        native, exc = self._first(True), self._first(False)
        kills = run.get("oom_kills")
        where = ""
        if isinstance(kills, int) and kills > 0:
            out.update(cause="oom_killer", oom_kills=kills, oom_source=run.get("oom_source"))
            text = "killed by the OOM killer"
        elif native is not None:
            out.update(cause="native_crash", stack_file=native.get("stack_file"))
            where = _rank_text(native)
            text = f"crashed in native code: {native.get('message')}{where}"
        elif exc is not None and str(exc.get("type")) == "KeyboardInterrupt":
            out["cause"], text = "interrupted", "interrupted (Ctrl-C)"
        elif exc is not None:
            what, extra = _exception_text(exc)
            out.update(cause="exception", **extra)
            out["exception"] = {
                k: exc[k] for k in ("type", "message", "thread", "where", "collective") if k in exc
            }
            where = _rank_text(exc)
            text = f"crashed: {what}{where}"
        elif sig:
            name = signal_name(sig)
            outside = run.get("signal_from") == "outside"
            if name == "SIGTERM" or (outside and name in _OUTSIDE):
                out["cause"] = "preempted" if name == "SIGTERM" else "killed"
                text = f"{_OUTSIDE.get(name, 'killed')} ({name})"
            elif name == "SIGINT":
                out["cause"], text = "interrupted", f"interrupted ({name})"
            else:
                out["cause"], text = "signal", f"signal {sig} ({name})"
            if outside:
                out["from_outside"] = True
        else:
            out["cause"], text = "exit", f"exit {status}"
        for pick in (exc, native):
            if pick is not None and pick.get("rank") is not None:
                out.setdefault("rank", pick["rank"])
        root = (out.get("launcher") or {}) if exc is not None else {}
        if not root and exc is not None and str(exc.get("type", "")).endswith("ChildFailedError"):
            root = launcher_root_cause(str(exc.get("message") or "")) or {}
        if "rank" not in out and "rank" in root:  # only the launcher spoke: its root cause's rank
            out["rank"] = root["rank"]
            if out["cause"] in ("oom_killer", "exception"):
                text += f" (rank {root['rank']})"
        hung = _hung_s(last_step_t, t_end, interval_s)
        if hung is not None and out["cause"] in ("preempted", "killed", "signal", "interrupted",
                                                 "exception"):
            out["hung_s"] = hung
            text = f"hung {duration(hung)} without a step, then {text}"
        out["text"] = text
        return out


def _rank_text(crash: dict[str, Any]) -> str:
    return f" (rank {crash['rank']})" if crash.get("rank") is not None else ""


def _hung_s(last_step_t: float | None, t_end: float | None, interval_s: float | None) -> float | None:
    """Seconds without a step before the end, when that is a hang by the stuck alert's rule."""
    if last_step_t is None or t_end is None or not interval_s:
        return None
    silent = t_end - last_step_t
    return silent if silent > max(STUCK_FACTOR * interval_s, STUCK_MIN_S) else None
