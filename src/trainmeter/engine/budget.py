"""Progress and ETA against the declared budget, and the declared plan beside the measurement.

A budget may be declared in tokens, steps or FLOPs; all are turned into tokens, the unit the
rate is measured in: steps x tokens per step, FLOPs / FLOPs per token. ETA = remaining tokens /
tokens/s. When a step budget has no token count to convert it (a loop whose batches the agent
cannot count), progress and ETA fall back to steps and the step time.
"""

from __future__ import annotations

from typing import Any

from . import formulas
from .facts import FactStore


def budget(
    facts: FactStore,
    *,
    steps: int,
    tokens_seen: float,
    tokens_per_step: float | None,
    tokens_per_s: float | None,
    step_time_s: float | None,
    flops_per_token: float | None,
    absent: dict[str, str],
) -> dict[str, Any]:
    """Snapshot entries: budget, budget_tokens, progress, eta_s, flops_required/remaining."""
    out: dict[str, Any] = {}
    b_tokens = facts.number("budget_tokens")
    b_steps = facts.number("budget_steps")
    b_flops = facts.number("budget_flops")
    declared: tuple[str, float] | None = None
    tokens_budget: float | None = None
    if b_tokens is not None and b_tokens > 0:
        declared, tokens_budget = ("tokens", b_tokens), b_tokens
    elif b_steps is not None and b_steps > 0:
        declared = ("steps", b_steps)
        if tokens_per_step:
            tokens_budget = b_steps * tokens_per_step
    elif b_flops is not None and b_flops > 0:
        declared = ("flops", b_flops)
        if flops_per_token:
            tokens_budget = b_flops / flops_per_token
    if declared is None:
        absent["progress"] = "declare --budget-tokens, --budget-steps or --budget-flops"
        absent["eta_s"] = absent["progress"]
        return out
    kind, value = declared
    fact = facts.get(f"budget_{kind}")
    out["budget"] = {"unit": kind, "value": value, "source": fact.source if fact else None}
    if tokens_budget is None and kind == "steps":
        out["progress"] = steps / value
        if step_time_s:
            out["eta_s"] = formulas.eta_seconds(value - steps, 1.0 / step_time_s)
        else:
            absent["eta_s"] = "step time not measured yet"
        absent["budget_tokens"] = "tokens per step unknown: declare --tokens-per-step"
        return out
    if tokens_budget is None:
        absent["progress"] = (
            "a FLOPs budget needs FLOPs per token: declare --flops-per-token or the model shape"
        )
        absent["eta_s"] = absent["progress"]
        return out
    out["budget_tokens"] = tokens_budget
    out["progress"] = tokens_seen / tokens_budget
    if tokens_per_s:
        out["eta_s"] = formulas.eta_seconds(tokens_budget - tokens_seen, tokens_per_s)
    else:
        absent["eta_s"] = "tokens/s not measured yet (the first reports are warm-up)"
    if flops_per_token:
        out["flops_required"] = flops_per_token * tokens_budget
        out["flops_remaining"] = max(flops_per_token * (tokens_budget - tokens_seen), 0.0)
    return out


def plan(
    facts: FactStore,
    snap: dict[str, Any],
    peak_flops: float | None,
    n_gpus: int | None,
    flops_per_token: float | None,
    absent: dict[str, str],
) -> dict[str, Any] | None:
    """What was declared (--plan-mfu, --plan-hours) next to what is measured or projected."""
    planned_mfu, planned_hours = facts.number("plan_mfu"), facts.number("plan_hours")
    if planned_mfu is None and planned_hours is None:
        absent["plan"] = "declare --plan-mfu and --plan-hours to compare the plan with the run"
        return None
    mfu = snap.get("mfu") or {}
    result: dict[str, Any] = {}
    if planned_mfu is not None:
        result["mfu"] = dict(
            planned=planned_mfu, measured=mfu.get("value"), convention=mfu.get("convention")
        )
        if flops_per_token and peak_flops and n_gpus:
            rate = planned_mfu * n_gpus * peak_flops / flops_per_token
            result["tokens_per_s"] = dict(planned=rate, measured=snap.get("tokens_per_s"))
    if planned_hours is not None:
        elapsed, eta = (snap.get("time") or {}).get("elapsed_s"), snap.get("eta_s")
        known = elapsed is not None and eta is not None
        result["hours"] = dict(
            planned=planned_hours, projected=(elapsed + eta) / 3600.0 if known else None
        )
    if "budget_tokens" in snap:
        result["budget_tokens"] = snap["budget_tokens"]
    return result
