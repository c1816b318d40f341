"""`tm summary`'s GPU groups: the utilization ladder, OFU, the counters of each card, energy."""

from __future__ import annotations

from typing import Any

from ..snapread import get_dict, get_number
from .format import amount, mantissa, percent, si, si_unit
from .memory_text import pair
from .summary_blocks import LADDER_COLUMNS, _grid, _text
from .terminal import number


def gpus(snap: dict[str, Any]) -> list[Any]:
    out: list[Any] = []
    ladder = get_dict(snap, "ladder")
    if ladder:
        rows: list[list[Any]] = []
        per_gpu = get_dict(ladder, "gpus") or {}
        for gpu, values in [*per_gpu.items(), ("mean", ladder.get("mean") or {})]:
            name = f"GPU {gpu}" if gpu != "mean" else "all (mean)"
            cells = []
            for key, _ in LADDER_COLUMNS:
                v = number((values or {}).get(key))
                cells.append(percent(v) if v is not None else "-")
            rows.append([name, *cells])
        out.append(_grid(rows, header=["", *(label for _, label in LADDER_COLUMNS)]))
    ofu = get_dict(snap, "ofu")
    if ofu and number(ofu.get("value")) is not None:
        line = [("OFU ", "bold"), (percent(ofu["value"]), "bold"),
                f" ({ofu.get('convention')}, {ofu.get('source')})"]
        gap = get_dict(snap, "mfu_ofu_gap")
        if gap and number(gap.get("value")) is not None:
            line.append(f"   OFU - MFU gap {percent(gap['value']).removesuffix('%')} points")
        if ofu.get("note"):
            line.append(f"   {ofu['note']}")
        out.append(_text(*line))
    observed = snap.get("flops_observed")
    if isinstance(observed, dict) and number(observed.get("value")) is not None:
        note = f" ({observed['note']})" if observed.get("note") else ""
        out.append(_text("observed ", (si_unit(observed["value"], "FLOP"), "bold"), note))
    intensity = snap.get("arithmetic_intensity")
    if isinstance(intensity, dict) and number(intensity.get("value")) is not None:
        ridge = get_number(snap, "peak.ridge")
        bound = ""
        if ridge is not None:
            side = "memory-bound" if intensity["value"] < ridge else "compute-bound"
            bound = f", ridge {si(ridge)}: {side}"
        out.append(_text(f"arithmetic intensity {si(intensity['value'])} "
                         f"{intensity.get('unit', 'FLOP/byte')}{bound}"))
    counters = get_dict(snap, "gpus") or {}
    rows = []
    for gpu, row in counters.items():
        if not isinstance(row, dict):
            continue
        bits = []
        power, limit = number(row.get("power_w")), number(row.get("power_limit_w"))
        if power is not None:
            bits.append(mantissa(power) + (f"/{mantissa(limit)}" if limit else "") + " W")
        used, total = number(row.get("memory_used_b")), number(row.get("memory_total_b"))
        if used is not None and total:
            bits.append(f"mem {pair(used, total)}")
        clock = number(row.get("sm_clock_mhz"))
        if clock is not None:
            bits.append(amount(clock, "MHz"))
        temp = number(row.get("temperature_c"))
        if temp is not None:
            bits.append(amount(temp, "°C"))
        if row.get("throttle"):
            bits.append("throttled: " + ", ".join(map(str, row["throttle"])))
        rows.append([f"GPU {gpu}", str(row.get("name") or ""), ", ".join(bits)])
    if rows:
        out.append(_grid(rows))
    devices = get_dict(snap, "n_gpus")
    if devices and devices.get("source") == "assumed":
        out.append(_text(("GPU count assumed from the visible devices", "dim")))
    return out


def energy(snap: dict[str, Any]) -> list[Any]:
    entry = get_dict(snap, "energy")
    if not entry or number(entry.get("joules")) is None:
        return []
    line = [(si_unit(entry["joules"], "J"), "bold")]
    per_gpu = get_dict(entry, "per_gpu") or {}
    if per_gpu:
        line.append(" (" + ", ".join(f"GPU {g} {si_unit(j, 'J')}" for g, j in per_gpu.items()) + ")")
    if number(entry.get("joules_per_token")) is not None:
        line += ["   ", (si_unit(entry["joules_per_token"], "J"), "bold"), " per token"]
    out = [_text(*line)]
    if entry.get("source"):
        out.append(_text((str(entry["source"]), "dim")))
    return out
