"""The container's memory and CPU limits from the cgroup (v2 first, then v1).

A limit matters only when it is tighter than the host: a 512 GB node whose container may use
64 GB runs out at 64 GB, and `psutil` reports the node. So `limits()` returns the cgroup's
memory and CPU limits only where they are below the host's, with the files they came from.
Nested groups are walked to the mount root, since the tightest ancestor wins.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Any

from .files import Files

ROOT = "/sys/fs/cgroup"
#: cgroup v1 reports "no limit" as a huge page-aligned number, not as "max".
V1_UNLIMITED = 1 << 60


@dataclass
class CgroupReport:
    version: str | None = None  # "v2", "v1" or None
    memory_b: int | None = None
    cpu_cores: float | None = None
    sources: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _groups(files: Files, pid: int | str) -> dict[str, str]:
    """controller -> path from /proc/<pid>/cgroup ('' key for the v2 unified line)."""
    text = files.read(f"/proc/{pid}/cgroup") or ""
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _hier, controllers, path = parts
        if not controllers:
            out[""] = path
        for name in controllers.split(","):
            if name:
                out[name] = path
    return out


def _dirs(mount: str, path: str) -> list[str]:
    """The group's directory and its ancestors up to the mount, deepest first; then the mount
    itself (inside a container with a cgroup namespace the mount *is* the container's group)."""
    out = []
    rel = path.strip("/")
    while rel:
        out.append(posixpath.join(mount, rel))
        rel = posixpath.dirname(rel)
    out.append(mount)
    return out


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        return None


def _read_v2(files: Files, path: str, rep: CgroupReport) -> None:
    for d in _dirs(ROOT, path):
        mem = files.read(f"{d}/memory.max")
        if mem is not None and mem.strip() != "max":
            value = _int(mem)
            if value is not None and (rep.memory_b is None or value < rep.memory_b):
                rep.memory_b = value
                rep.sources.append(f"{d}/memory.max")
        cpu = files.read(f"{d}/cpu.max")
        if cpu is not None:
            quota, _, period = cpu.strip().partition(" ")
            if quota != "max" and _int(quota) and _int(period):
                cores = _int(quota) / _int(period)  # type: ignore[operator]
                if rep.cpu_cores is None or cores < rep.cpu_cores:
                    rep.cpu_cores = cores
                    rep.sources.append(f"{d}/cpu.max")


def _v1_mount(groups: dict[str, str], files: Files, controller: str) -> str | None:
    for name in (controller, "cpu,cpuacct", "cpuacct,cpu"):
        mount = f"{ROOT}/{name}"
        if files.listdir(mount) is not None:
            return mount
    return None


def _read_v1(files: Files, groups: dict[str, str], rep: CgroupReport) -> None:
    mount = _v1_mount(groups, files, "memory")
    if mount and "memory" in groups:
        for d in _dirs(mount, groups["memory"]):
            value = _int(files.read(f"{d}/memory.limit_in_bytes"))
            if value is not None and value < V1_UNLIMITED:
                if rep.memory_b is None or value < rep.memory_b:
                    rep.memory_b = value
                    rep.sources.append(f"{d}/memory.limit_in_bytes")
    mount = _v1_mount(groups, files, "cpu")
    if mount and "cpu" in groups:
        for d in _dirs(mount, groups["cpu"]):
            quota = _int(files.read(f"{d}/cpu.cfs_quota_us"))
            period = _int(files.read(f"{d}/cpu.cfs_period_us"))
            if quota and quota > 0 and period:
                cores = quota / period
                if rep.cpu_cores is None or cores < rep.cpu_cores:
                    rep.cpu_cores = cores
                    rep.sources.append(f"{d}/cpu.cfs_quota_us")


def read_cgroup(files: Files, pid: int | str = "self") -> CgroupReport:
    """Every limit the process's cgroup sets, whatever the host has."""
    rep = CgroupReport()
    groups = _groups(files, pid)
    if not groups:
        rep.notes.append(f"/proc/{pid}/cgroup is unreadable: not Linux, or the process is gone")
        return rep
    if "" in groups and files.read(f"{ROOT}/cgroup.controllers") is not None:
        rep.version = "v2"
        _read_v2(files, groups[""], rep)
    elif any(k for k in groups if k):
        rep.version = "v1"
        _read_v1(files, groups, rep)
    else:
        rep.notes.append("no cgroup controllers mounted where trainmeter looks (/sys/fs/cgroup)")
    if rep.version and rep.memory_b is None and rep.cpu_cores is None:
        rep.notes.append(f"the cgroup ({rep.version}) sets no memory or CPU limit")
    return rep


def limits(
    files: Files, host_memory_b: int | None, host_cores: int | None, pid: int | str = "self"
) -> tuple[dict[str, Any] | None, str]:
    """`sample.node`'s `limits` (only what is below the host) or None, and why."""
    rep = read_cgroup(files, pid)
    out: dict[str, Any] = {}
    if rep.memory_b is not None and (host_memory_b is None or rep.memory_b < host_memory_b):
        out["memory_b"] = rep.memory_b
    if rep.cpu_cores is not None and (host_cores is None or rep.cpu_cores < host_cores):
        out["cpu_cores"] = rep.cpu_cores
    if out:
        out["source"] = f"cgroup {rep.version}: " + ", ".join(rep.sources)
        return out, ""
    if rep.notes:
        return None, "; ".join(rep.notes)
    return None, f"the cgroup ({rep.version}) limits are not below the host's"
