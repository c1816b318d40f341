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
) -> Section:
    """mfu: {value or range, convention, n_gpus, peak, peak_label, peak_source, by_convention}."""
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

    def util(per_token: float) -> float:
        return mfu_of(per_token, tokens_per_s, n_gpus, peak_flops)  # type: ignore[arg-type]

    entry: dict[str, Any] = dict(
        convention=flops_per_token["convention"], n_gpus=n_gpus, peak=peak["name"],
        peak_label=peak["label"], peak_source=peak["source"],
    )
    if flops_per_token["value"] is None:
        entry["range"] = [util(flops_per_token["range"][0]), util(flops_per_token["range"][1])]
    else:
        entry["value"] = util(flops_per_token["value"])
        out.explain["mfu"] = _explain(
            entry, flops_per_token, tokens_per_s, n_gpus, n_gpus_source, peak
        )
    if shape is not None:
        entry["by_convention"] = {k: util(v) for k, v in all_conventions(shape).items()}
    out.values["mfu"] = entry
    return out


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
