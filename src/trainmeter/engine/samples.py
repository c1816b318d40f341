"""Samples, and FLOPs per step and per sample: the answers for models without tokens.

A vision, diffusion, speech or recommender model feeds no token tensor, so tokens/s and FLOPs
per token do not exist for it; samples do. Samples per step are declared (`--samples-per-step`,
the whole step over every rank) or detected by the agent (the first batch's leading dimension x
the micro-batches of a step, on one rank, so x the data-parallel degree here). FLOPs per step
come from the counted step (`FlopCounterMode`, one rank: x the data-parallel degree) or from a
declared `--flops-per-sample` x samples per step. MFU under the convention `counted`:

    MFU = FLOPs per step x steps/s / (GPUs x dense peak),  steps/s = 1 / step time

Tokens that were never seen are absent with their reason, never 0.
"""

from __future__ import annotations

from typing import Any

from .formulas import num

_PROVIDERS = ("declared", "emitted")


def _per_step(engine: Any, key: str) -> tuple[float, str, str | None] | None:
    """(value for the whole step over all ranks, source, note) of a per-step fact, or None."""
    fact = engine.facts.get(key)
    value = engine.facts.number(key)
    if fact is None or value is None or value <= 0:
        return None
    if fact.source in _PROVIDERS:
        return value, fact.source, fact.note
    dp = max(int(engine.clock.dp or 1), 1)
    note = f"{value:g} on one rank x {dp} data-parallel ranks" if dp > 1 else fact.note
    return value * dp, fact.source, note


def add(snap: dict[str, Any], absent: dict[str, str], engine: Any) -> None:
    """Add `samples` to `snap` (or absent reasons), and make never-seen tokens absent."""
    clock = engine.clock
    if clock.records and not clock.has_tokens and clock.declared_per_step is None:
        if not snap.get("tokens_seen"):
            snap.pop("tokens_seen", None)
            absent["tokens_seen"] = (
                "the agent could not count tokens in the batches (no 2-D integer token "
                "tensor): a model without tokens is measured in samples; if it has tokens, "
                "declare --tokens-per-step or emit(tokens_per_step=...)"
            )
    samples = _per_step(engine, "samples_per_step")
    counted = _per_step(engine, "counted_flops_per_step")
    step_time = num(snap.get("step_time_s"))
    out: dict[str, Any] = {}
    explain = snap.setdefault("explain", {})
    if samples is None:
        absent["samples_per_s"] = (
            "no batch was seen with a leading dimension: declare --samples-per-step"
        )
    else:
        per_step, source, note = samples
        out["per_step"] = per_step
        out["source"] = source
        if note:
            out["note"] = note
        if step_time:
            out["per_s"] = per_step / step_time
            explain["samples_per_s"] = {
                "value": out["per_s"], "unit": "samples/s",
                "formula": "samples_per_step / step_time_s",
                "inputs": [
                    {"name": "samples_per_step", "value": per_step, "unit": "samples",
                     "source": source},
                    {"name": "step_time_s", "value": step_time, "unit": "s",
                     "source": "measured (rank 0's step records)"},
                ],
            }
        else:
            absent["samples_per_s"] = "needs the step time: " + absent.get(
                "step_time_s", "not measured yet"
            )
    flops: tuple[float, str] | None = None
    declared = engine.facts.number("flops_per_sample")
    if declared and samples is not None:
        flops = (declared * samples[0], "declared (flops per sample x samples per step)")
    elif counted is not None:
        flops = (counted[0], "counted (FlopCounterMode, one whole step)")
        if counted[2]:
            out["flops_note"] = counted[2]
    if counted is not None and engine.facts.number("counted_flops_per_token") is None:
        absent["counted"] = (
            "FLOPs per token: no token tensor in the batches; the counted step's FLOPs per step "
            "and per sample are under samples"
        )
    if flops is None:
        absent["flops_per_step"] = (
            "no step was counted and --flops-per-sample was not declared"
            if engine.facts.value("counted_unavailable") is None
            else f"not counted: {engine.facts.value('counted_unavailable')}"
        )
    else:
        out["flops_per_step"] = flops[0]
        out["flops_source"] = flops[1]
        if samples is not None:
            out["flops_per_sample"] = flops[0] / samples[0]
        else:
            absent["flops_per_sample"] = "needs samples per step: declare --samples-per-step"
        _mfu(snap, out, flops, step_time, absent, explain)
    if out:
        snap["samples"] = out


def _mfu(
    snap: dict[str, Any],
    out: dict[str, Any],
    flops: tuple[float, str],
    step_time: float | None,
    absent: dict[str, str],
    explain: dict[str, Any],
) -> None:
    if (snap.get("counted") or {}).get("utilization") is not None:
        return  # a model with tokens: the same counted MFU is counted.utilization, from tokens/s
    peak = snap.get("peak") or {}
    peak_flops = num(peak.get("bf16_dense_flops"))
    n_gpus = num((snap.get("n_gpus") or {}).get("value"))
    if not step_time:
        absent["samples_mfu"] = "needs the step time"
        return
    if not peak_flops:
        absent["samples_mfu"] = "no dense peak to divide by: " + absent.get("peak", "no GPU")
        return
    if not n_gpus:
        absent["samples_mfu"] = "the GPU count is unknown"
        return
    value = flops[0] / step_time / (n_gpus * peak_flops)
    out["mfu"] = {"value": value, "convention": "counted", "n_gpus": int(n_gpus)}
    explain["samples_mfu"] = {
        "value": value, "unit": "fraction of dense peak", "convention": "counted",
        "formula": "flops_per_step * steps_per_s / (n_gpus * peak)",
        "inputs": [
            {"name": "flops_per_step", "value": flops[0], "unit": "FLOP", "source": flops[1]},
            {"name": "steps_per_s", "value": 1.0 / step_time, "unit": "1/s",
             "source": "1 / step time (measured)"},
            {"name": "n_gpus", "value": n_gpus, "unit": "GPUs", "source": "snapshot n_gpus"},
            {"name": "peak", "value": peak_flops, "unit": "FLOP/s",
             "source": str(peak.get("label"))},
        ],
        "peak_source": str(peak.get("source")),
    }
