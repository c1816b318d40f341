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

from typing import TYPE_CHECKING, Any

from .formulas import num
from .section import Section

if TYPE_CHECKING:
    from .facts import FactStore
    from .throughput import StepClock

_PROVIDERS = ("declared", "emitted")


def _per_step(facts: FactStore, dp: int, key: str) -> tuple[float, str, str | None] | None:
    """(value for the whole step over all ranks, source, note) of a per-step fact, or None."""
    fact = facts.get(key)
    value = facts.number(key)
    if fact is None or value is None or value <= 0:
        return None
    if fact.source in _PROVIDERS:
        return value, fact.source, fact.note
    note = f"{value:g} on one rank x {dp} data-parallel ranks" if dp > 1 else fact.note
    return value * dp, fact.source, note


def no_tokens(clock: Any, tokens_seen: float | None) -> str | None:
    """Why `tokens_seen` is absent rather than a counted 0: steps were counted and no batch
    showed a token tensor (nor was a count declared); None when tokens stand."""
    if clock.records and not clock.has_tokens and clock.declared_per_step is None:
        if not tokens_seen:
            return (
                "the agent could not count tokens in the batches (no 2-D integer token "
                "tensor): a model without tokens is measured in samples; if it has tokens, "
                "declare --tokens-per-step or emit(tokens_per_step=...)"
            )
    return None


def section(
    facts: FactStore,
    clock: StepClock,
    *,
    tokens_seen: float | None,
    step_time: float | None,
    step_time_reason: str | None,
    counted_utilization: float | None,
    peak: dict[str, Any] | None,
    peak_reason: str | None,
    n_gpus: int | None,
) -> Section:
    """samples (or absent reasons); `tokens_seen` absent when the batches showed no tokens.

    It comes after the snapshot's other parts and says better where it speaks: its entries
    replace theirs (`Section.override`), so `absent.tokens_seen` takes the counted 0 out."""
    out = Section()
    absent, explain = out.absent, out.explain
    untokened = no_tokens(clock, tokens_seen)
    if untokened is not None:
        absent["tokens_seen"] = untokened
    dp = max(int(clock.dp or 1), 1)
    samples = _per_step(facts, dp, "samples_per_step")
    counted = _per_step(facts, dp, "counted_flops_per_step")
    step_time = num(step_time)
    entry: dict[str, Any] = {}
    if samples is None:
        absent["samples_per_s"] = (
            "no batch was seen with a leading dimension: declare --samples-per-step"
        )
    else:
        per_step, source, note = samples
        entry["per_step"] = per_step
        entry["source"] = source
        if note:
            entry["note"] = note
        if step_time:
            entry["per_s"] = per_step / step_time
            explain["samples_per_s"] = {
                "value": entry["per_s"], "unit": "samples/s",
                "formula": "samples_per_step / step_time_s",
                "inputs": [
                    {"name": "samples_per_step", "value": per_step, "unit": "samples",
                     "source": source},
                    {"name": "step_time_s", "value": step_time, "unit": "s",
                     "source": "measured (rank 0's step records)"},
                ],
            }
        else:
            absent["samples_per_s"] = "needs the step time: " + (
                step_time_reason if step_time_reason is not None else "not measured yet"
            )
    flops = _flops(facts, entry, samples, counted, absent)
    if flops is not None:
        if counted_utilization is None:  # with tokens, the counted MFU is counted.utilization
            _mfu(entry, flops, step_time, peak, peak_reason, n_gpus, absent, explain)
    if entry:
        out.values["samples"] = entry
    return out


def _flops(
    facts: FactStore,
    entry: dict[str, Any],
    samples: tuple[float, str, str | None] | None,
    counted: tuple[float, str, str | None] | None,
    absent: dict[str, str],
) -> tuple[float, str] | None:
    """FLOPs per step (and per sample) from a declared --flops-per-sample or the counted step."""
    flops: tuple[float, str] | None = None
    declared = facts.number("flops_per_sample")
    if declared and samples is not None:
        flops = (declared * samples[0], "declared (flops per sample x samples per step)")
    elif counted is not None:
        flops = (counted[0], "counted (FlopCounterMode over whole steps: one, or one cycle of a loop whose steps differ)")
        if counted[2]:
            entry["flops_note"] = counted[2]
    if counted is not None and facts.number("counted_flops_per_token") is None:
        absent["counted"] = (
            "FLOPs per token: no token tensor in the batches; the counted step's FLOPs per step "
            "and per sample are under samples"
        )
    if flops is None:
        absent["flops_per_step"] = (
            "no step was counted and --flops-per-sample was not declared"
            if facts.value("counted_unavailable") is None
            else f"not counted: {facts.value('counted_unavailable')}"
        )
        return None
    entry["flops_per_step"] = flops[0]
    entry["flops_source"] = flops[1]
    if samples is not None:
        entry["flops_per_sample"] = flops[0] / samples[0]
    else:
        absent["flops_per_sample"] = "needs samples per step: declare --samples-per-step"
    return flops


def _mfu(
    entry: dict[str, Any],
    flops: tuple[float, str],
    step_time: float | None,
    peak: dict[str, Any] | None,
    peak_reason: str | None,
    n_gpus: int | None,
    absent: dict[str, str],
    explain: dict[str, Any],
) -> None:
    peak = peak or {}
    peak_flops = num(peak.get("bf16_dense_flops"))
    gpus = num(n_gpus)
    if not step_time:
        absent["samples_mfu"] = "needs the step time"
        return
    if not peak_flops:
        absent["samples_mfu"] = "no dense peak to divide by: " + (
            peak_reason if peak_reason is not None else "no GPU"
        )
        return
    if not gpus:
        absent["samples_mfu"] = "the GPU count is unknown"
        return
    value = flops[0] / step_time / (gpus * peak_flops)
    entry["mfu"] = {"value": value, "convention": "counted", "n_gpus": int(gpus)}
    explain["samples_mfu"] = {
        "value": value, "unit": "fraction of dense peak", "convention": "counted",
        "formula": "flops_per_step * steps_per_s / (n_gpus * peak)",
        "inputs": [
            {"name": "flops_per_step", "value": flops[0], "unit": "FLOP", "source": flops[1]},
            {"name": "steps_per_s", "value": 1.0 / step_time, "unit": "1/s",
             "source": "1 / step time (measured)"},
            {"name": "n_gpus", "value": gpus, "unit": "GPUs", "source": "snapshot n_gpus"},
            {"name": "peak", "value": peak_flops, "unit": "FLOP/s",
             "source": str(peak.get("label"))},
        ],
        "peak_source": str(peak.get("source")),
    }
