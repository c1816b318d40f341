"""Memory per rank, from the agent's `memory` records: the snapshot's `memory` section, the
alerts that come before an out-of-memory crash, and the numbers the advice rests on.

Each rank's latest reading is kept, with the highest allocated and reserved bytes seen, the
allocated bytes read right after an optimizer step (what lives between steps), and when its
allocation-retry count last rose. Thresholds:

- retries rising: a rank's `alloc_retries` grew within RETRY_WINDOW_S before its latest
  reading (the allocator had to free its cache and try again: the next step may not fit);
- nearly full: reserved bytes within NEAR_FULL_MARGIN of the card's total.
"""

from __future__ import annotations

from typing import Any

from .formulas import num
from .section import Section

RETRY_WINDOW_S = 60.0
NEAR_FULL_MARGIN = 0.05

#: fields copied from a reading into the rank's row
_FIELDS = (
    "allocated_b", "allocated_peak_b", "reserved_b", "reserved_peak_b", "inactive_split_b",
    "alloc_retries", "ooms", "total_b", "rss_b", "rss_peak_b",
)


class RankMemory:
    __slots__ = ("latest", "t", "peak_allocated", "peak_reserved", "between_steps_b",
                 "retries_rose_t", "retries_before", "missing", "device", "index")

    def __init__(self) -> None:
        self.latest: dict[str, float] = {}
        self.t = 0.0
        self.peak_allocated: float | None = None
        self.peak_reserved: float | None = None
        self.between_steps_b: float | None = None
        self.retries_rose_t: float | None = None
        self.retries_before: float | None = None
        self.missing: dict[str, str] = {}
        self.device: str | None = None
        self.index: Any = None


class MemoryState:
    """Fed `memory` records; gives the `memory` section and the memory alerts.

    A process without a rank is the training process of a run that is not distributed (shown
    as rank 0), unless ranked processes report too: then it is a launcher (torchrun imports
    torch as well) and is left out."""

    def __init__(self) -> None:
        self.by_rank: dict[int | None, RankMemory] = {}

    @property
    def ranks(self) -> dict[int, RankMemory]:
        ranked = {r: m for r, m in self.by_rank.items() if r is not None}
        if ranked or None not in self.by_rank:
            return ranked
        return {0: self.by_rank[None]}

    def sample(self, rank: int | None, t: float, d: dict[str, Any]) -> None:
        row = self.by_rank.setdefault(rank, RankMemory())
        values = {k: v for k in _FIELDS if (v := num(d.get(k))) is not None and v >= 0}
        retries, before = values.get("alloc_retries"), row.latest.get("alloc_retries")
        if retries is not None and before is not None and retries > before:
            row.retries_rose_t, row.retries_before = t, before
        row.latest, row.t = values, t
        row.device = d.get("device") if isinstance(d.get("device"), str) else row.device
        row.index = d.get("index")
        missing = d.get("missing")
        row.missing = {k: v for k, v in missing.items() if isinstance(v, str)} if isinstance(
            missing, dict) else {}
        for name, attr in (("allocated", "peak_allocated"), ("reserved", "peak_reserved")):
            high = max(
                (v for v in (values.get(f"{name}_b"), values.get(f"{name}_peak_b"),
                             getattr(row, attr)) if v is not None),
                default=None,
            )
            setattr(row, attr, high)
        if d.get("at_step") is True and "allocated_b" in values:
            row.between_steps_b = values["allocated_b"]

    def _row(self, rank: int, mem: RankMemory) -> dict[str, Any]:
        out: dict[str, Any] = {"device": mem.device, **mem.latest}
        if mem.index is not None:
            out["index"] = mem.index
        if mem.peak_allocated is not None:
            out["allocated_peak_b"] = mem.peak_allocated
        if mem.peak_reserved is not None:
            out["reserved_peak_b"] = mem.peak_reserved
        reserved, allocated = mem.latest.get("reserved_b"), mem.latest.get("allocated_b")
        if reserved and allocated is not None:
            out["fragmentation_b"] = max(reserved - allocated, 0.0)
            out["fragmentation"] = max(reserved - allocated, 0.0) / reserved
        total = mem.latest.get("total_b")
        if total and reserved is not None:
            out["reserved_share"] = reserved / total
        if mem.peak_reserved is not None and total:
            out["reserved_peak_share"] = mem.peak_reserved / total
        if mem.between_steps_b is not None:
            out["between_steps_b"] = mem.between_steps_b
            if mem.peak_allocated:
                out["transient_share"] = max(mem.peak_allocated - mem.between_steps_b, 0.0) / (
                    mem.peak_allocated
                )
        if mem.missing:
            out["missing"] = dict(mem.missing)
        return out

    def section(self) -> Section:
        if not self.by_rank or not self.ranks:  # the first test: no record, no rank to sort
            return Section(
                absent={
                    "memory": "no memory reading from the training process (no agent, the "
                    "memory probe is off, or torch was never imported)"
                }
            )
        rows = {str(rank): self._row(rank, mem) for rank, mem in sorted(self.ranks.items())}
        whole: dict[str, Any] = {"ranks": rows}
        devices = sorted({r["device"] for r in rows.values() if r.get("device")})
        if devices:
            whole["device"] = devices[0] if len(devices) == 1 else ",".join(devices)
        for key in ("allocated_peak_b", "reserved_peak_b", "rss_peak_b", "total_b"):
            values = [r[key] for r in rows.values() if key in r]
            if values:
                whole[key] = max(values)
        for key in ("alloc_retries", "ooms"):
            values = [r[key] for r in rows.values() if key in r]
            if values:
                whole[key] = sum(values)
        return Section(values={"memory": whole})

    def alerts(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for rank, mem in sorted(self.ranks.items()):
            latest = mem.latest
            where = f"rank {rank}" + (f" (GPU {mem.index})" if mem.index is not None else "")
            base: dict[str, Any] = {"rank": rank, "t": mem.t}
            for key in ("reserved_b", "allocated_b", "total_b"):
                if key in latest:
                    base[key] = latest[key]
            if mem.retries_rose_t is not None and mem.t - mem.retries_rose_t <= RETRY_WINDOW_S:
                out.append({
                    **base,
                    "kind": "memory_retries",
                    "key": f"memory_retries:{rank}",
                    "message": (
                        f"{where}: the caching allocator had to free its cache and retry "
                        "allocations: memory is nearly exhausted, an out-of-memory error may follow"
                    ),
                    "alloc_retries": latest.get("alloc_retries"),
                    "alloc_retries_before": mem.retries_before,
                })
            total, reserved = latest.get("total_b"), latest.get("reserved_b")
            if total and reserved is not None and reserved >= (1 - NEAR_FULL_MARGIN) * total:
                out.append({
                    **base,
                    "kind": "memory_near_full",
                    "key": f"memory_near_full:{rank}",
                    "message": (
                        f"{where}: reserved memory is within {NEAR_FULL_MARGIN:.0%} of the "
                        "card's total: an out-of-memory error may follow"
                    ),
                    "reserved_share": reserved / total,
                })
        return out
