"""Plain-text lines for the insight parts of a snapshot: samples, the MFU waterfall, advice.

Pure string building (no I/O), so `tm summary` and any other text view can print the same
lines; every part copes with its key missing (the snapshot may come from an older log).
"""

from __future__ import annotations

import math
from typing import Any

from .format import amount, fixed_places, si_unit
from .format import percent as _pct
from .format import si as _si


def _loss(loss: Any) -> str:
    """What a factor takes off the level, as the page writes it beside the factor: a factor
    of 0.983 reads "×1.0" by the rule, and "−1.7%" says what it costs."""
    if not isinstance(loss, (int, float)) or isinstance(loss, bool):
        return ""
    if 0.999 < loss < 1:  # all but a sliver lost: the digits that show the sliver, as the page
        return "−" + fixed_places(100 * loss, max(1, math.ceil(-math.log10(1 - loss)) - 1)) + "%"
    return "−" + _pct(loss) if loss >= 0 else "+" + _pct(-loss)


def models_lines(snap: dict[str, Any]) -> list[str]:
    """Several models trained together: one line each, then the total and what it means."""
    m = snap.get("models")
    if not isinstance(m, dict) or not isinstance(m.get("trained"), list):
        return []
    lines = [
        f"{x.get('name')} ({x.get('class')}): {_si(x['params'])} parameters"
        for x in m["trained"]
        if isinstance(x, dict) and isinstance(x.get("params"), (int, float))
    ]
    if isinstance(m.get("total_params"), (int, float)):
        lines.append(
            f"total {_si(m['total_params'])} parameters ({m.get('source')}); FLOPs from the "
            "counted step, which runs every model: no convention's formula is one model's job"
        )
    return lines


def samples_lines(snap: dict[str, Any]) -> list[str]:
    s = snap.get("samples")
    if not isinstance(s, dict):
        return []
    head = []
    if isinstance(s.get("per_s"), (int, float)):
        head.append(f"{_si(s['per_s'])} samples/s")
    if isinstance(s.get("per_step"), (int, float)):
        head.append(f"{_si(s['per_step'])} samples/step ({s.get('source')})")
    if isinstance(s.get("flops_per_sample"), (int, float)):
        head.append(f"{si_unit(s['flops_per_sample'], 'FLOP')}/sample")
    if isinstance(s.get("flops_per_step"), (int, float)):
        head.append(f"{si_unit(s['flops_per_step'], 'FLOP')}/step")
    mfu = s.get("mfu")
    if isinstance(mfu, dict) and isinstance(mfu.get("value"), (int, float)):
        head.append(f"MFU {_pct(mfu['value'])} (counted)")
    return ["samples: " + ", ".join(head)] if head else []


def waterfall_lines(snap: dict[str, Any]) -> list[str]:
    wf = snap.get("waterfall")
    if not isinstance(wf, dict):
        return []
    ends = wf.get("ends_at_label") or f"MFU ({wf.get('convention')})"
    if wf.get("ends_at") in (None, "mfu"):
        lines = [f"MFU waterfall ({wf.get('convention')}), from 100% of the dense peak:"]
    else:
        lines = [
            f"Utilization waterfall: ends at the {ends}, not at an MFU "
            f"({wf.get('mfu_absent') or 'MFU absent'}); from 100% of the dense peak:"
        ]
    level = 1.0
    in_steps = False
    factors = wf.get("factors") or []
    width = max((len(f.get("label", "")) for f in factors), default=0)
    shown = [amount(f["value"], "factor") for f in factors]
    losses = [_loss(f.get("loss")) for f in factors]
    fw, lw = max(map(len, shown), default=0), max(map(len, losses), default=0)
    for f, factor, loss in zip(factors, shown, losses, strict=True):
        if f.get("scope") == "steps" and not in_steps:
            in_steps = True
            lines.append("  within the training steps (100% = the peak while steps run):")
            level = 1.0
        level *= f["value"]
        lines.append(
            f"  {factor:>{fw}} {loss:>{lw}}  {f.get('label', f['name']):<{width}}  -> {_pct(level)}"
        )
        if f.get("above_one"):
            lines.append(f"      (above 1: {f['above_one']})")
    if wf.get("ends_at") in (None, "mfu"):
        lines.append(f"  = MFU {_pct(wf['value'])} ({wf.get('convention')})")
    else:
        lines.append(f"  = {ends} {_pct(wf['value'])}")
    whole = wf.get("whole_run")
    if isinstance(whole, dict):
        end = "MFU" if wf.get("ends_at") in (None, "mfu") else ends
        lines.append(f"  over the whole run (window / elapsed x {end}): {_pct(whole['value'])}")
    for name, why in (wf.get("absent") or {}).items():
        lines.append(f"  absent {name}: {why}")
    return lines


def waterfall_title(snap: dict[str, Any]) -> str:
    """The section title: an MFU waterfall only when the chain ends at the MFU."""
    wf = snap.get("waterfall")
    if isinstance(wf, dict) and wf.get("ends_at") not in (None, "mfu"):
        return f"Utilization waterfall (ends at the {wf.get('ends_at_label')}): where the peak went"
    return "MFU waterfall: where the peak went"


def advice_lines(snap: dict[str, Any]) -> list[str]:
    items = snap.get("advice")
    if not isinstance(items, list) or not items:
        return []
    return ["what to try:"] + [f"  - {a.get('message')}" for a in items if isinstance(a, dict)]


def insight_lines(snap: dict[str, Any]) -> list[str]:
    return samples_lines(snap) + waterfall_lines(snap) + advice_lines(snap)
