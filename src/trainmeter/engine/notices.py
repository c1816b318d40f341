"""Warnings: what the numbers depend on that a person should know (an assumption, facts that
disagree, records dropped or skipped). Each is one sentence; the numbers stay as computed."""

from __future__ import annotations

from .facts import FactStore
from .section import Section
from .throughput import StepClock


def section(facts: FactStore, clock: StepClock, ignored: int) -> Section:
    out = Section()
    warnings = out.warnings
    experts = facts.value("moe_experts")
    active_known = all(facts.number(k) for k in ("moe_routed_params", "moe_experts", "moe_top_k"))
    if experts is not None and not active_known:
        warnings.append(
            f"mixture of experts ({experts} experts in the config): only the active "
            "parameters do work per token, so a FLOPs count from all parameters is too high; "
            "declare --top-k, or give the active count with --params"
        )
    declared = clock.declared_per_step
    detected = [v for v in (clock.detected_per_step, clock.detected_real_per_step) if v]
    if declared is not None and detected and all(abs(declared / v - 1.0) > 0.01 for v in detected):
        warnings.append(
            f"tokens per step: {declared:g} declared, {detected[0]:g} detected in the "
            "batches (more than 1% apart); counting the declared value"
        )
    reason = facts.value("observe_only")
    if reason is not None:
        warnings.append(
            f"observe only ({reason}): no agent runs inside the program, so there are no "
            "steps, tokens, loss or MFU; GPU and host counters only"
        )
    for key in ("agent_dropped_records", "ingest_dropped"):
        lost = facts.number(key)
        if lost:
            warnings.append(f"{lost:g} records were dropped ({key}): counts may be low")
    for key in facts.keys():
        if key == "tokens_per_step":
            continue
        best = facts.get(key)
        for other in facts.conflicts(key):
            warnings.append(
                f"{key}: {other.source} {other.value!r} disagrees with {best.source} "  # type: ignore[union-attr]
                f"{best.value!r}; the {best.source} value is used"  # type: ignore[union-attr]
            )
    if ignored:
        warnings.append(f"{ignored} records could not be used and were skipped")
    return out
