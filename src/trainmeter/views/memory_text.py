"""The snapshot's `memory` and `death` sections in words: one line a rank for `tm summary`, a
short phrase for the end-of-run line, the peak per GPU for the passport, the details of a death.
Pure: snapshot in, text out."""

from __future__ import annotations

from typing import Any

from ..snapread import get_dict
from .format import mantissa, percent, si, si_unit


def size(b: Any) -> str:
    """Bytes in binary units, as the allocator and `nvidia-smi` count them, by the one rule:
    '3.4 GiB', '344 MiB'."""
    if isinstance(b, bool) or not isinstance(b, (int, float)):
        return "?"
    return si_unit(b, "B")


def _rows(snap: dict[str, Any]) -> dict[str, dict[str, Any]]:
    mem = get_dict(snap, "memory") or {}
    rows = get_dict(mem, "ranks") or {}
    return {k: v for k, v in rows.items() if isinstance(v, dict)}


def _where(rank: str, row: dict[str, Any]) -> str:
    device = row.get("device") or "?"
    index = row.get("index")
    return f"rank {rank} {device}" + (f":{index}" if index is not None else "")


def rank_line(rank: str, row: dict[str, Any]) -> str:
    bits = []
    if "allocated_b" in row:
        bits.append(f"allocated {size(row['allocated_b'])} (peak {size(row.get('allocated_peak_b'))})")
    if "reserved_b" in row:
        total = row.get("total_b")
        of = f" of {size(total)}" if total else ""
        share = row.get("reserved_share")
        pct = f" ({percent(share)})" if isinstance(share, (int, float)) else ""
        peak = row.get("reserved_peak_b")
        bits.append(f"reserved {size(row['reserved_b'])}{of}{pct}, peak {size(peak)}")
    if "fragmentation" in row and row.get("reserved_b"):
        bits.append(f"cached, not allocated {size(row['fragmentation_b'])} "
                    f"({percent(row['fragmentation'])})")
    if "alloc_retries" in row:
        bits.append(f"{si(row['alloc_retries'])} retries, {si(row.get('ooms', 0))} OOMs")
    if "rss_b" in row:
        bits.append(f"RSS {size(row['rss_b'])} (peak {size(row.get('rss_peak_b'))})")
    missing = get_dict(row, "missing") or {}
    reasons = sorted(set(missing.values()))
    if reasons and "allocated_b" not in row:
        bits.append("allocator numbers absent: " + "; ".join(reasons))
    return f"{_where(rank, row)}: " + ", ".join(bits)


def memory_lines(snap: dict[str, Any]) -> list[str]:
    """One line a rank, for `tm summary`."""
    return [rank_line(rank, row) for rank, row in _rows(snap).items()]


def end_phrase(snap: dict[str, Any]) -> str | None:
    """For the end-of-run line: 'mem peak 71.2 GiB of 79.6 GiB' (GPU), 'RSS peak 1.2 GiB'."""
    mem = get_dict(snap, "memory") or {}
    if mem.get("reserved_peak_b") is not None:
        total = mem.get("total_b")
        return f"mem peak {size(mem['reserved_peak_b'])}" + (f" of {size(total)}" if total else "")
    if mem.get("rss_peak_b") is not None:
        return f"RSS peak {size(mem['rss_peak_b'])}"
    return None


def _short(b: float, scale: float) -> str:
    """Bytes in `scale` units, by the one rule: 61.2, 80.0, 304."""
    return mantissa(b / scale)


def pair(used: float, total: float) -> str:
    """Used of total bytes in the total's unit, by the one rule: '61.2/80.0 GiB'."""
    scale, unit = _unit(total)
    return f"{_short(used, scale)}/{_short(total, scale)} {unit}"


def _unit(b: float) -> tuple[float, str]:
    for scale, unit in ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if abs(b) >= scale:
            return scale, unit
    return 1.0, "B"


def now_figure(snap: dict[str, Any]) -> tuple[str, str, str] | None:
    """Memory now, for the live views: (label, figure, where). With a caching allocator, the
    fullest rank's reserved bytes against its card, ('mem', '61.2/80.0 GiB', 'rank 3, 76.5%'),
    because reserved memory is what runs out; without one (CPU), the largest process's
    resident memory, ('RSS', '304 MiB', 'rank 0'). None when no rank has reported memory."""
    rows = _rows(snap)
    number = (int, float)
    gpu = [(rank, row) for rank, row in rows.items() if isinstance(row.get("reserved_b"), number)
           and not isinstance(row.get("reserved_b"), bool)]
    where = "" if len(rows) == 1 else "rank {rank}"
    if gpu:
        rank, row = max(gpu, key=lambda r: r[1].get("reserved_share") or r[1]["reserved_b"])
        reserved, total = row["reserved_b"], row.get("total_b")
        if isinstance(total, number) and total > 0:
            figure = pair(reserved, total)
            bits = [where.format(rank=rank), percent(reserved / total)]
        else:
            scale, unit = _unit(reserved)
            figure, bits = f"{_short(reserved, scale)} {unit}", [where.format(rank=rank)]
        return "mem", figure, ", ".join(b for b in bits if b)
    cpu = [(rank, row) for rank, row in rows.items() if isinstance(row.get("rss_b"), number)
           and not isinstance(row.get("rss_b"), bool)]
    if cpu:
        rank, row = max(cpu, key=lambda r: r[1]["rss_b"])
        scale, unit = _unit(row["rss_b"])
        return "RSS", f"{_short(row['rss_b'], scale)} {unit}", where.format(rank=rank)
    return None


def peak_per_gpu(snap: dict[str, Any]) -> list[dict[str, Any]]:
    """The passport's rows: each rank's device and its peak allocated and reserved bytes."""
    out = []
    for rank, row in _rows(snap).items():
        entry: dict[str, Any] = {"rank": rank, "device": row.get("device")}
        for key in ("index", "allocated_peak_b", "reserved_peak_b", "total_b", "rss_peak_b",
                    "alloc_retries", "ooms"):
            if key in row:
                entry[key] = row[key]
        out.append(entry)
    return out


def peak_text(row: dict[str, Any]) -> str:
    """A passport row as 'rank 0 cuda:0 | 4.1 GiB reserved, 3.4 GiB allocated, of 79.6 GiB'."""
    where = _where(str(row.get("rank")), row)
    bits = []
    if "reserved_peak_b" in row:
        bits.append(f"{size(row['reserved_peak_b'])} reserved")
    if "allocated_peak_b" in row:
        bits.append(f"{size(row['allocated_peak_b'])} allocated")
    if "total_b" in row and bits:
        bits[-1] += f", of {size(row['total_b'])}"
    if not bits and "rss_peak_b" in row:
        bits.append(f"{size(row['rss_peak_b'])} resident (no GPU allocator)")
    return f"{where} | {', '.join(bits) or 'not measured'}"


def death_lines(snap: dict[str, Any]) -> list[str]:
    """The measured details under the cause of death, for `tm summary`."""
    death = get_dict(snap, "death") or {}
    out = []
    exc = get_dict(death, "exception") or {}
    if exc:
        where = f" at {exc['where']}" if exc.get("where") else ""
        thread = f" in thread {exc['thread']}" if exc.get("thread") not in (None, "MainThread") else ""
        first = str(exc.get("message") or "").strip().splitlines()[:1]
        out.append(f"{exc.get('type')}{thread}{where}: {first[0][:160] if first else ''}")
    oom = get_dict(death, "oom") or {}
    if oom:
        head = f"tried to allocate {size(oom.get('tried_b'))}"
        if "free_b" in oom:
            head += f" with {size(oom['free_b'])} free"
        if "total_b" in oom:
            head += f" of {size(oom['total_b'])}"
        if "gpu" in oom:
            head += f" on GPU {oom['gpu']}"
        tail = [f"{size(oom['allocated_b'])} allocated by PyTorch" if "allocated_b" in oom else "",
                f"{size(oom['reserved_unallocated_b'])} reserved but unallocated"
                if "reserved_unallocated_b" in oom else ""]
        tail = [t for t in tail if t]
        out.append(head + (f"; {', '.join(tail)}" if tail else ""))
    timeout = get_dict(death, "timeout") or {}
    if timeout:
        out.append(f"collective {timeout.get('collective') or '?'} on {timeout.get('backend') or '?'}")
    if death.get("stack_file"):
        out.append(f"every thread's Python stack: {death['stack_file']} in the run directory")
    if death.get("cause") == "oom_killer":
        out.append(f"{death.get('oom_kills')} OOM kill(s) during the run ({death.get('oom_source')})")
    return out


def alert_numbers(alert: dict[str, Any]) -> str:
    """The measured numbers of a memory alert, to follow its message ('' for other kinds):
    ' (reserved 77.0 GiB of 80.0 GiB, 96.2%; 3 allocation retries, 0 before)'."""
    if not str(alert.get("kind") or "").startswith("memory_"):
        return ""
    bits = []
    if "reserved_b" in alert:
        of = f" of {size(alert['total_b'])}" if "total_b" in alert else ""
        share = alert["reserved_b"] / alert["total_b"] if alert.get("total_b") else None
        bits.append(f"reserved {size(alert['reserved_b'])}{of}" + (f", {percent(share)}" if share else ""))
    if "alloc_retries" in alert:
        bits.append(f"{si(alert['alloc_retries'])} allocation retries, "
                    f"{si(alert.get('alloc_retries_before', 0))} before")
    return f" ({'; '.join(bits)})" if bits else ""
