"""The `counted` convention: FLOPs the operators executed in one real step (torch's
FlopCounterMode), per token. Shown beside MFU and never in its place: it counts recompute and
leaves out what the counter has no formula for.
"""

from __future__ import annotations

from typing import Any

from .facts import FactStore
from .flops import ModelShape, all_conventions
from .formulas import mfu as mfu_of
from .section import Section


def section(
    facts: FactStore,
    *,
    tokens_seen: float | None,
    tokens_per_s: float | None,
    peak: dict[str, Any] | None,
    n_gpus: int | None,
    shape: ModelShape | None,
    no_agent: str | None = None,
) -> Section:
    out = Section()
    per_token = facts.number("counted_flops_per_token")
    if per_token is None:
        out.absent["counted"] = no_agent or (
            "no step was counted (the agent's flops probe did not attach, or FlopCounterMode "
            "saw no operator it knows)"
        )
        return out
    source = facts.get("counted_flops_per_token").source  # type: ignore[union-attr]
    counted: dict[str, Any] = dict(
        convention="counted", per_token=per_token, source=source,
        note="FLOPs the operators executed (recompute included): not model FLOPs",
    )
    if tokens_seen is not None:
        counted["flops_spent"] = per_token * tokens_seen
    if tokens_per_s and n_gpus and peak is not None:
        counted["utilization"] = mfu_of(per_token, tokens_per_s, n_gpus, peak["bf16_dense_flops"])
    if shape is not None:
        counted["against_conventions"] = {
            k: per_token / v for k, v in all_conventions(shape).items() if v
        }
    out.values["counted"] = counted
    return out
