"""The machine around the run: the training process tree (host) and the node.

Samplers send cumulative counters (CPU seconds, disk and network bytes); rates are differences
between two samples over the time between them. A cumulative counter that falls (a process of
the tree exited and took its CPU time with it, a counter wrapped) is not a negative rate: the
previous rate is kept for CPU, and no rate is given for that interval for disk and network.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from .formulas import num
from .section import Section


class HostSeries:
    """Cores busy and resident memory of the training process tree."""

    def __init__(self) -> None:
        self.latest: dict[str, Any] = {}
        self._prev: tuple[float, float] | None = None
        self._rate: float | None = None
        self.samples = 0

    def sample(self, t: float, d: dict[str, Any]) -> None:
        self.samples += 1
        out: dict[str, Any] = {}
        procs = d.get("procs")
        if isinstance(procs, int) and not isinstance(procs, bool):
            out["procs"] = procs
        rss_kb = num(d.get("rss_kb"))
        if rss_kb is not None:
            out["rss_b"] = rss_kb * 1024
        cores = self._cores(t, num(d.get("cpu_s")))
        if cores is not None:
            out["cpu_cores"] = cores
        self.latest = out

    def values(self) -> dict[str, Any]:
        """`section`'s values alone (a replay's samples hand on nothing else)."""
        return {"host": dict(self.latest)} if self.latest else {}

    def section(self) -> Section:
        values = self.values()
        if values:
            return Section(values=values)
        return Section(absent={"host": "no process-tree sample yet"})

    def _cores(self, t: float, cpu_s: float | None) -> float | None:
        """CPU seconds used per second since the previous reading; kept when the total fell."""
        if cpu_s is None:
            return self._rate
        last, self._prev = self._prev, (t, cpu_s)
        if last is not None:
            elapsed, used = t - last[0], cpu_s - last[1]
            if elapsed > 0 and used >= 0:
                self._rate = used / elapsed
        return self._rate


#: How far back the disk trend looks.
DISK_TREND_S = 600.0


class NodeSeries:
    """The node's CPU split, load, memory, disk, I/O and network rates, and limits.

    Each sample moves the counters' rates and the disk trend; the node's entry (`latest`) is
    made from the latest sample when read (a sample or a snapshot), not at every sample."""

    def __init__(self) -> None:
        self._latest: dict[str, Any] = {}
        #: the latest sample and its rates, until read (`latest`)
        self._fresh: tuple[dict[str, Any], dict[str, float]] | None = None
        self.samples = 0
        self._prev_t: float | None = None
        self._prev_io: dict[str, float] = {}
        self._rates: dict[str, float] = {}
        self.disk_trend: deque[tuple[float, float]] = deque()

    def sample(self, t: float, d: dict[str, Any]) -> None:
        self.samples += 1
        counters: dict[str, float] = {}
        for group, fields in (("disk_io", ("read_b", "write_b")), ("net", ("rx_b", "tx_b"))):
            values = d.get(group)
            if isinstance(values, dict):
                for name in fields:
                    v = num(values.get(name))
                    if v is not None:
                        counters[f"{group}.{name}"] = v
        prev_t = self._prev_t
        rates: dict[str, float] = {}
        if prev_t is not None and t > prev_t:
            for name, value in counters.items():
                before = self._prev_io.get(name)
                if before is not None and value >= before:
                    rates[name] = (value - before) / (t - prev_t)
        self._prev_t = t
        self._prev_io = counters
        disk = d.get("disk")
        free = num(disk.get("free_b")) if isinstance(disk, dict) else None
        if free is not None:
            trend = self.disk_trend
            trend.append((t, free))
            while len(trend) > 2 and trend[1][0] <= t - DISK_TREND_S:
                trend.popleft()
        self._fresh = (d, rates)

    @property
    def latest(self) -> dict[str, Any]:
        """The latest sample's entry: cpu, memory, disk, limits, cores, cpu_per_core, load,
        rates_b_s (each when the sample had it in its shape)."""
        if self._fresh is not None:
            d, rates = self._fresh
            self._fresh = None
            node: dict[str, Any] = {}
            for key in ("cpu", "memory", "disk", "limits"):
                if isinstance(d.get(key), dict):
                    node[key] = dict(d[key])
            if num(d.get("cores")) is not None:
                node["cores"] = d["cores"]
            per_core = d.get("cpu_per_core")
            if isinstance(per_core, list) and all(num(x) is not None for x in per_core):
                node["cpu_per_core"] = list(per_core)
            if isinstance(d.get("load"), list):
                node["load"] = list(d["load"])
            if rates:
                node["rates_b_s"] = {k.replace(".", "_"): v for k, v in sorted(rates.items())}
            self._latest = node
        return self._latest

    def values(self) -> dict[str, Any]:
        """`section`'s values alone (a replay's samples hand on nothing else)."""
        latest = self.latest
        return {"node": dict(latest)} if latest else {}

    def section(self) -> Section:
        values = self.values()
        if values:
            return Section(values=values)
        return Section(absent={"node": "no node sample yet"})
