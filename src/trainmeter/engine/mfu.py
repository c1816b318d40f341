"""Model FLOPs utilization: the model's FLOPs per token times tokens/s, over the GPUs' dense
peak. Modelled, so it is only meaningful with its convention named; beside it the `counted`
convention (FLOPs the operators executed), shown and never used in MFU's place.
"""

from __future__ import annotations

from typing import Any

from . import explain
from .flops import ModelShape, all_conventions
from .formulas import mfu as mfu_of
from .section import Section

_N_GPUS_SOURCE = {
    "detected": "detected: the GPUs the training processes reported (or the sampler tied to them)",
    "declared": "declared with --gpus",
    "assumed": "assumed: every visible GPU (the training process did not report its GPUs)",
}


def section(
    *,
    flops_per_token: dict[str, Any] | None,
    flops_reason: str | None,
    tokens_per_s: float | None,
    tokens_reason: str | None,
    peak: dict[str, Any] | None,
    peak_reason: str | None,
    n_gpus: int | None,
    n_gpus_source: str | None,
    shape: ModelShape | None,
    precision: tuple[str, str | None] | None = None,
    detail: bool = True,
) -> Section:
    """mfu: {value or range, convention, n_gpus, peak, peak_label, peak_source, by_convention,
    precision, and at_precision: the utilization against the dense peak of the precision the
    matmuls ran in, when the card's datasheet gives it and it is not BF16}. `detail` False:
    the explanation left out, for `Engine.sample`."""
    out = Section()
    if flops_per_token is None:
        out.absent["mfu"] = f"needs FLOPs per token: {flops_reason}"
        return out
    if not tokens_per_s:
        out.absent["mfu"] = f"needs tokens/s: {tokens_reason or 'not measured yet'}"
        return out
    if peak is None:
        out.absent["mfu"] = f"no dense peak to divide by: {peak_reason}"
        return out
    if not n_gpus:
        out.absent["mfu"] = "the GPU count is unknown"
        return out
    peak_flops = peak["bf16_dense_flops"]
    per_s, whole = tokens_per_s, n_gpus * peak_flops  # `formulas.mfu`, in line: no call a value
    entry: dict[str, Any] = {
        "convention": flops_per_token["convention"], "n_gpus": n_gpus, "peak": peak["name"],
        "peak_label": peak["label"], "peak_source": peak["source"],
    }
    if flops_per_token["value"] is None:
        low, high = flops_per_token["range"][0], flops_per_token["range"][1]
        entry["range"] = [low * per_s / whole, high * per_s / whole]
    else:
        entry["value"] = flops_per_token["value"] * per_s / whole
        if detail:
            out.explain["mfu"] = _explain(
                entry, flops_per_token, tokens_per_s, n_gpus, n_gpus_source, peak
            )
    if shape is not None:
        by_convention = {}
        for name, per_token in all_conventions(shape).items():
            by_convention[name] = per_token * per_s / whole
        entry["by_convention"] = by_convention
    _precision(entry, precision, peak, flops_per_token, tokens_per_s, n_gpus)
    out.values["mfu"] = entry
    return out


def _precision(
    entry: dict[str, Any],
    precision: tuple[str, str | None] | None,
    peak: dict[str, Any],
    fpt: dict[str, Any],
    tokens_per_s: float,
    n_gpus: int,
) -> None:
    """Say the precision next to MFU (which stays against the BF16 peak), and beside it the
    utilization against that precision's own dense peak when the datasheet gives one."""
    if precision is None:
        entry["precision"] = None
        entry["precision_note"] = "not detected (no agent, or no training forward yet)"
        return
    name, how = precision
    entry["precision"] = name
    entry["precision_note"] = how
    other = (peak.get("other_precisions") or {}).get(name)
    if name == "bf16" or other is None or fpt.get("value") is None:
        if name != "bf16":
            entry["precision_note"] = (
                f"{how}; MFU is against the dense BF16 peak; {peak['name']} has no "
                f"{name.upper()} dense peak in its datasheet line, so no utilization at {name}"
            )
        return
    entry["at_precision"] = {
        "value": mfu_of(fpt["value"], tokens_per_s, n_gpus, other["flops"]),
        "precision": name,
        "peak_flops": other["flops"],
        "peak_source": other["source"],
        "label": f"utilization against the dense {name.upper()} peak (not MFU)",
    }


def _explain(
    entry: dict[str, Any],
    fpt: dict[str, Any],
    tps: float,
    n_gpus: int,
    n_gpus_source: str | None,
    peak: dict[str, Any],
) -> dict[str, Any]:
    conv = fpt["convention"]
    inputs = [
        explain.given("flops_per_token", fpt["value"], "FLOP/token",
                      f"{fpt['source']}, {conv} convention (see flops_per_token)"),
        explain.given("tokens_per_s", tps, "tokens/s", "measured (see tokens_per_s)"),
        explain.given("n_gpus", n_gpus, "GPUs", _N_GPUS_SOURCE.get(n_gpus_source or "", "unknown")),
        explain.given("peak_flops", peak["bf16_dense_flops"], "FLOP/s per GPU",
                      f"{peak['label']}: dense BF16 peak of {peak['name']}"),
    ]
    return explain.explanation(
        entry["value"], "fraction", "flops_per_token * tokens_per_s / (n_gpus * peak_flops)",
        inputs, convention=conv, peak_source=peak["source"] or peak["label"],
        note="model FLOPs over the dense peak of every GPU the training uses (a fraction: 0.4 "
        "is 40%)",
    )
