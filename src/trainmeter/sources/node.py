"""`sample.node`: the machine around the run (CPU split, load, memory, disk, network, limits).

CPU fractions (by kind, and busy per core: a run that keeps one core at 100% while the rest
idle shows as one full bar, not as 1/64 busy) are over the time since the previous sample (the first covers the time since the
sampler was made), so a stall shows in the second it happens. Disk and network bytes are
cumulative counters; the reader takes differences. Loopback traffic is left out of `net`.
Each part is read on its own; one that fails is named in `missing` and the rest still come.
"""

from __future__ import annotations

import os
from typing import Any

from ..payloads import SAMPLE_NODE
from . import cgroup
from .files import Files

try:
    import psutil
except ImportError:  # pragma: no cover
    psutil = None  # type: ignore[assignment]


def _cpu_split(prev: Any, cur: Any) -> dict[str, float] | None:
    """Fractions of all CPU time between two `psutil.cpu_times()` readings."""
    fields = cur._fields
    delta = {f: max(getattr(cur, f) - getattr(prev, f), 0.0) for f in fields}
    # guest time is already inside user on Linux; counting it again would overstate.
    total = sum(v for k, v in delta.items() if k not in ("guest", "guest_nice"))
    if total <= 0:
        return None
    user = delta.get("user", 0.0) + delta.get("nice", 0.0)
    system = delta.get("system", 0.0) + delta.get("irq", 0.0) + delta.get("softirq", 0.0)
    return {
        "user": user / total,
        "system": system / total,
        "iowait": delta.get("iowait", 0.0) / total,
        "steal": delta.get("steal", 0.0) / total,
        "idle": delta.get("idle", 0.0) / total,
    }


class NodeSampler:
    kind = SAMPLE_NODE.name

    def __init__(
        self,
        run_dir: str | os.PathLike[str] = ".",
        pid: int | str = "self",
        files: Files | None = None,
    ) -> None:
        self.run_dir = os.fspath(run_dir)
        self.pid = pid
        self.files = files or Files()
        self._cpu_prev = psutil.cpu_times() if psutil is not None else None
        self._cores_prev = psutil.cpu_times(percpu=True) if psutil is not None else None
        self._limits: tuple[dict[str, Any] | None, str] | None = None

    def sample(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        missing: dict[str, str] = {}
        if psutil is None:
            return {"missing": {"node": "psutil is not installed"}}
        for key, part in (
            ("cpu", self._cpu),
            ("cpu_per_core", self._per_core),
            ("cores", lambda: psutil.cpu_count(logical=True)),
            ("load", lambda: [round(x, 3) for x in os.getloadavg()]),
            ("memory", self._memory),
            ("disk", self._disk),
            ("disk_io", self._disk_io),
            ("net", self._net),
        ):
            try:
                value = part()
            except Exception as exc:  # noqa: BLE001 - one part never costs the others
                missing[key] = f"{type(exc).__name__}: {exc}"
                continue
            if value is None:
                missing[key] = "not available on this system"
            else:
                out[key] = value
        try:
            lim, why = self._limits_once(out)
        except Exception as exc:  # noqa: BLE001 - limits unreadable: reported as unknown
            lim, why = None, f"{type(exc).__name__}: {exc}"
        if lim:
            out["limits"] = lim
        else:
            missing["limits"] = why
        if missing:
            out["missing"] = missing
        return out

    def close(self) -> None:
        pass

    def _cpu(self) -> dict[str, float] | None:
        cur = psutil.cpu_times()
        prev, self._cpu_prev = self._cpu_prev, cur
        split = _cpu_split(prev, cur) if prev is not None else None
        if split is None:  # no time passed: the split since boot
            zero = type(cur)(*([0.0] * len(cur)))
            split = _cpu_split(zero, cur)
        return split

    def _per_core(self) -> list[float] | None:
        """Busy share of each logical core since the previous sample (1 - idle - iowait)."""
        cur = psutil.cpu_times(percpu=True)
        prev, self._cores_prev = self._cores_prev, cur
        if not prev or len(prev) != len(cur):
            return None
        busy = []
        for before, after in zip(prev, cur, strict=True):
            split = _cpu_split(before, after)
            if split is None:
                return None
            busy.append(round(max(0.0, 1.0 - split["idle"] - split["iowait"]), 4))
        return busy

    @staticmethod
    def _memory() -> dict[str, int]:
        vm = psutil.virtual_memory()
        sw = psutil.swap_memory()
        out = {
            "total_b": vm.total,
            "available_b": vm.available,
            "used_b": vm.used,
            "swap_total_b": sw.total,
            "swap_used_b": sw.used,
        }
        cached = getattr(vm, "cached", None)
        if cached is not None:
            out["cached_b"] = cached + getattr(vm, "buffers", 0)
        return out

    def _disk(self) -> dict[str, Any] | None:
        usage = self.files.disk_usage(self.run_dir)
        if usage is None:
            return None
        return {"path": os.path.abspath(self.run_dir), **usage}

    @staticmethod
    def _disk_io() -> dict[str, int] | None:
        io = psutil.disk_io_counters()
        if io is None:
            return None
        return {"read_b": io.read_bytes, "write_b": io.write_bytes}

    @staticmethod
    def _net() -> dict[str, int] | None:
        per = psutil.net_io_counters(pernic=True)
        if not per:
            return None
        rx = sum(c.bytes_recv for nic, c in per.items() if nic != "lo")
        tx = sum(c.bytes_sent for nic, c in per.items() if nic != "lo")
        return {"rx_b": rx, "tx_b": tx}

    def _limits_once(self, out: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
        # Limits change rarely; read them once per sampler (a cgroup read is a few files).
        if self._limits is None:
            host_mem = out.get("memory", {}).get("total_b")
            host_cores = out.get("cores")
            self._limits = cgroup.limits(self.files, host_mem, host_cores, self.pid)
        return self._limits
