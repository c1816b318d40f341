"""The `counted` convention: FLOPs the operators executed in one real step (torch's FLOP
formulas and the agent's), per token. Shown beside MFU and never in its place: it counts
recompute and leaves out what has no formula, and the operators that ran without one are named.

When the count and the model's formula disagree by more than `MISMATCH_FACTOR` either way, a
warning says so: recompute makes the count about 4/3 of the formula, so a factor of 2 is
something else (work the count missed, experts not known to the formula, a wrong shape).
"""

from __future__ import annotations

import math
from typing import Any

from .facts import FactStore
from .flops import ModelShape, all_conventions
from .formulas import mfu as mfu_of
from .section import Section

#: counted / formula outside [1 / factor, factor] is warned about
MISMATCH_FACTOR = 2.0


def section(
    facts: FactStore,
    *,
    tokens_seen: float | None,
    tokens_per_s: float | None,
    peak: dict[str, Any] | None,
    n_gpus: int | None,
    shape: ModelShape | None,
    no_agent: str | None = None,
    flops_per_token: dict[str, Any] | None = None,
) -> Section:
    out = Section()
    missing = _missing_ops(facts)
    if missing:
        out.warnings.append(
            "the counted step ran matmul-class operators with no FLOP formula, so the counted "
            f"FLOPs leave their work out: {', '.join(missing)}"
        )
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
    if missing:
        counted["missing_ops"] = missing
    if tokens_seen is not None:
        counted["flops_spent"] = per_token * tokens_seen
    if tokens_per_s and n_gpus and peak is not None:
        counted["utilization"] = mfu_of(per_token, tokens_per_s, n_gpus, peak["bf16_dense_flops"])
    if shape is not None:
        counted["against_conventions"] = {
            k: per_token / v for k, v in all_conventions(shape).items() if v
        }
    ratio = _against_formula(per_token, flops_per_token, counted.get("against_conventions"))
    if ratio is not None:
        counted["formula_ratio"] = ratio
        if not 1 / MISMATCH_FACTOR <= ratio["ratio"] <= MISMATCH_FACTOR:
            out.warnings.append(
                f"counted FLOPs per token are {ratio['ratio']:.2f}x the {ratio['convention']} "
                f"formula's (more than {MISMATCH_FACTOR:g}x apart): the count may miss work "
                "(operators with no formula), or the formula's shape may be wrong (experts, "
                "layers, width or sequence length: see flops_per_token)"
            )
    out.values["counted"] = counted
    return out


def _missing_ops(facts: FactStore) -> list[str]:
    value = facts.value("counted_missing_ops")
    if not isinstance(value, list):
        return []
    return [str(v) for v in value if isinstance(v, str)]


def _against_formula(
    per_token: float, fpt: dict[str, Any] | None, against: dict[str, float] | None
) -> dict[str, Any] | None:
    """counted / the formula: the chosen convention's (or a declared value), else the nearest
    of all conventions (the count is only warned about when no convention is near it)."""
    value = (fpt or {}).get("value")
    if isinstance(value, (int, float)) and value > 0:
        return {"convention": str(fpt["convention"]), "ratio": per_token / value,  # type: ignore[index]
                "factor": MISMATCH_FACTOR}
    ratios = {k: r for k, r in (against or {}).items() if r > 0}
    if not ratios:
        return None
    name = min(ratios, key=lambda k: abs(math.log(ratios[k])))
    return {"convention": f"nearest ({name})", "ratio": ratios[name], "factor": MISMATCH_FACTOR}
