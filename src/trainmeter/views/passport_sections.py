"""The passport's sections beside the training numbers: the MFU waterfall in short, the final
value of each series, the time split and the plan against what the run did.
"""

from __future__ import annotations

from typing import Any

from ..snapread import finite_value as _num
from .passport_entry import as_dict


def waterfall_section(snap: dict[str, Any]) -> dict[str, Any] | None:
    """The MFU waterfall in short (each factor's name, label, value and scope), or None."""
    wf = as_dict(snap.get("waterfall"))
    factors = [f for f in wf.get("factors") or [] if isinstance(f, dict)]
    if not factors or _num(wf.get("value")) is None:
        return None
    return {
        "convention": wf.get("convention"),
        "ends_at_label": wf.get("ends_at_label"),
        "value": _num(wf.get("value")),
        "whole_run": _num(as_dict(wf.get("whole_run")).get("value")),
        "factors": [
            {"name": f.get("name"), "label": f.get("label"), "value": _num(f.get("value")),
             "scope": f.get("scope")}
            for f in factors
        ],
        "absent": {str(k): str(v) for k, v in as_dict(wf.get("absent")).items()},
    }


def series_section(snap: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, entry in sorted(as_dict(snap.get("series")).items()):
        entry = as_dict(entry)
        out[str(name)] = {
            "final": _num(entry.get("value")),
            "step": entry.get("step"),
            "count": entry.get("count"),
            "source": entry.get("source"),
            "via": entry.get("via"),
        }
    return out


def time_split_section(snap: dict[str, Any]) -> list[dict[str, Any]]:
    parts = []
    for part in as_dict(snap.get("time")).get("parts") or []:
        if isinstance(part, dict) and _num(part.get("s")) is not None:
            entry = {"name": part.get("name"), "label": part.get("label"),
                     "s": _num(part.get("s")), "measured": bool(part.get("measured"))}
            if part.get("reason") and not _num(part.get("s")):  # a zero nobody timed
                entry["not_measured"] = str(part["reason"])
            parts.append(entry)
    return parts


def plan_section(snap: dict[str, Any]) -> dict[str, Any] | None:
    """What was declared beside what the run did: MFU, tokens/s, hours (None: no plan)."""
    plan = as_dict(snap.get("plan"))
    out: dict[str, Any] = {}
    for key, planned, actual in (("mfu", "planned", "measured"),
                                 ("tokens_per_s", "planned", "measured"),
                                 ("hours", "planned", "projected")):
        part = as_dict(plan.get(key))
        if part:
            out[key] = {"planned": _num(part.get(planned)), "actual": _num(part.get(actual))}
            if part.get("convention"):
                out[key]["convention"] = part["convention"]
    return out or None


def ranks_section(snap: dict[str, Any]) -> dict[str, Any] | None:
    """Each rank's step split into compute and waiting for the others (over every block once
    the run has ended), and the straggler named with what it cost; None when the ranks did not
    report their waits (a single process)."""
    comm = as_dict(snap.get("comm"))
    rows = as_dict(comm.get("ranks"))
    if not rows:
        return None
    keep = ("step_s", "compute_s", "wait_s", "wait_share", "wait_total_s")
    out: dict[str, Any] = {
        "per_rank": {
            str(r): {k: _num(row.get(k)) for k in keep}
            for r, row in rows.items() if isinstance(row, dict)
        },
        "timed": comm.get("timed"),
        "rule": comm.get("rule"),
        "episodes": [e for e in comm.get("episodes") or [] if isinstance(e, dict)],
    }
    straggler = as_dict(snap.get("straggler"))
    if straggler:
        out["straggler"] = straggler
    return out
