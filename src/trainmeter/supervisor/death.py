"""What `tm` itself can see of how a run died: the kernel's OOM-killer count, a signal sent from
outside, and the Python stacks faulthandler wrote on a native crash.

- The OOM killer leaves no message to the process it kills. Its count is read before the child
  starts and after it ended: the cgroup's `memory.events` `oom_kill` (v2; v1's
  `memory.oom_control`) for the group `tm` runs in (the child's too), else the host's
  `/proc/vmstat` `oom_kill` (then another process's death on the host would count: the source
  says which it was).
- A signal that `tm` forwarded (a scheduler's SIGTERM to `tm`) came from outside: preemption.
- `fault.<pid>.<rank>` files the agent's faulthandler wrote beside the socket are moved into the
  run directory (empty ones, from processes that ended well, are dropped) and named in a
  `crash` record of `tm`'s own.
"""

from __future__ import annotations

import os

from ..agent.inputs import read_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

CGROUP_ROOT = "/sys/fs/cgroup"
_PROC_MAX = 1 << 20  # a cgroup or /proc file of ours is a few lines


def _own_cgroup_dirs() -> list[str]:
    """The cgroup directories (v2 unified, v1 memory) of this process, deepest first."""
    try:
        lines = read_text("/proc/self/cgroup", _PROC_MAX, "cgroup file").splitlines()
    except (OSError, ValueError):
        return []
    out = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            base = CGROUP_ROOT
        elif "memory" in controllers.split(","):
            base = os.path.join(CGROUP_ROOT, "memory")
        else:
            continue
        path = path.strip("/")
        while True:
            out.append(os.path.join(base, path) if path else base)
            if not path:
                break
            path = os.path.dirname(path)
    return out


def _field(path: str, name: str) -> int | None:
    try:
        for line in read_text(path, _PROC_MAX, "cgroup file").splitlines():
            key, _, value = line.partition(" ")
            if key == name:
                return int(value)
    except (OSError, ValueError):
        return None
    return None


def oom_kills() -> dict[str, Any] | None:
    """{count, source}: OOM kills so far in this cgroup (or on the host), or None."""
    for directory in _own_cgroup_dirs():
        for file in ("memory.events", "memory.oom_control"):
            count = _field(os.path.join(directory, file), "oom_kill")
            if count is not None:
                return {"count": count, "source": os.path.join(directory, file)}
    count = _field("/proc/vmstat", "oom_kill")
    if count is not None:
        return {"count": count, "source": "/proc/vmstat (the whole host)"}
    return None


def oom_delta(before: dict[str, Any] | None, after: dict[str, Any] | None) -> dict[str, Any] | None:
    """The OOM kills during the run, from two readings of the same source."""
    if not before or not after or before.get("source") != after.get("source"):
        return None
    return {"kills": max(after["count"] - before["count"], 0), "source": after["source"]}


#: The most of a fault file kept: every thread's stack is a few kilobytes; a file past this was
#: not written by faulthandler alone.
MAX_FAULT_B = 1 << 20


def collect_faults(socket_dir: str | None, run_dir: Path | None) -> list[dict[str, Any]]:
    """Copy non-empty fault files into the run directory (at most `MAX_FAULT_B` of each, its
    frames redacted as a crash message is, through the run directory's descriptor); one
    `crash` payload each."""
    if not socket_dir or run_dir is None:
        return []
    from ..redact import redact_free
    from ..runlog.rundir import RunDir

    out = []
    try:
        names = sorted(n for n in os.listdir(socket_dir) if n.startswith("fault."))
        folder = RunDir.at(run_dir)
    except OSError:
        return []
    for name in names:
        try:
            _, pid, rank = name.split(".", 2)
            fd = os.open(os.path.join(socket_dir, name), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
            with os.fdopen(fd, "rb") as fh:
                raw = fh.read(MAX_FAULT_B)
            if not raw:
                continue
            text = "\n".join(redact_free(line) for line in raw.decode("utf-8", "replace").split("\n"))
            target = f"fault.{pid}.txt"
            folder.write_text(target, text)
        except (OSError, ValueError):
            continue
        first = next((ln for ln in text.splitlines() if ln.startswith("Fatal Python error")), "")
        out.append({
            "native": True,
            "type": "native crash",
            "message": first.removeprefix("Fatal Python error: ").strip() or "native crash",
            "pid": int(pid) if pid.isdigit() else None,
            "rank": int(rank) if rank.isdigit() else None,
            "stack_file": target,
            "threads": text.count("Thread 0x") + text.count("Current thread 0x"),
        })
    return out
