"""Plain-text lines for the insight parts of a snapshot: samples, the MFU waterfall, advice.

Pure string building (no I/O), so `tm summary` and any other text view can print the same
lines; every part copes with its key missing (the snapshot may come from an older log).
"""

from __future__ import annotations

from typing import Any

from .format import percent as _pct
from .format import si as _si


def _factor(x: float) -> str:
    return f"{x:.3f}" if 0.001 <= abs(x) < 1000 else f"{x:.3g}"


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
        head.append(f"{_si(s['flops_per_sample'])} FLOPs/sample")
    if isinstance(s.get("flops_per_step"), (int, float)):
        head.append(f"{_si(s['flops_per_step'])} FLOPs/step")
    mfu = s.get("mfu")
    if isinstance(mfu, dict) and isinstance(mfu.get("value"), (int, float)):
        head.append(f"MFU {_pct(mfu['value'])} (counted)")
    return ["samples: " + ", ".join(head)] if head else []


def waterfall_lines(snap: dict[str, Any]) -> list[str]:
    wf = snap.get("waterfall")
    if not isinstance(wf, dict):
        return []
    lines = [f"MFU waterfall ({wf.get('convention')}), from 100% of the dense peak:"]
    level = 1.0
    in_steps = False
    width = max((len(f.get("label", "")) for f in wf.get("factors") or []), default=0)
    for f in wf.get("factors") or []:
        if f.get("scope") == "steps" and not in_steps:
            in_steps = True
            lines.append("  within the training steps (100% = the peak while steps run):")
            level = 1.0
        level *= f["value"]
        lines.append(
            f"  x {_factor(f['value']):>9}  {f.get('label', f['name']):<{width}}  -> {_pct(level)}"
        )
        if f.get("above_one"):
            lines.append(f"      (above 1: {f['above_one']})")
    lines.append(f"  = MFU {_pct(wf['value'])} ({wf.get('convention')})")
    whole = wf.get("whole_run")
    if isinstance(whole, dict):
        lines.append(f"  over the whole run (window / elapsed x MFU): {_pct(whole['value'])}")
    for name, why in (wf.get("absent") or {}).items():
        lines.append(f"  absent {name}: {why}")
    return lines


def advice_lines(snap: dict[str, Any]) -> list[str]:
    items = snap.get("advice")
    if not isinstance(items, list) or not items:
        return []
    return ["what to try:"] + [f"  - {a.get('message')}" for a in items if isinstance(a, dict)]


def insight_lines(snap: dict[str, Any]) -> list[str]:
    return samples_lines(snap) + waterfall_lines(snap) + advice_lines(snap)
