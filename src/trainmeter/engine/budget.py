"""Progress and ETA against the declared budget, and the declared plan beside the measurement.

A budget may be declared in tokens, steps or FLOPs, and progress is counted in the budget's own
unit: steps / budget_steps (100 of 100 steps is 100 %, whatever the tokens per step did), FLOPs
spent / budget_flops, tokens_seen / budget_tokens; the ETA is what is left in that unit at the
current pace (steps left x step time; FLOPs left / (tokens/s x FLOPs per token); tokens left /
tokens/s). The budget is also turned into tokens where it can be (steps x tokens per step, FLOPs /
FLOPs per token), for the FLOPs required. Once the run has ended there is no ETA.
"""

from __future__ import annotations

from typing import Any

from . import explain, formulas
from .facts import FactStore
from .section import Section

_BUDGET_FLAGS = "declare --budget-tokens, --budget-steps or --budget-flops"


def _declared(facts: FactStore) -> tuple[str, float] | None:
    for kind in ("tokens", "steps", "flops"):
        value = facts.number(f"budget_{kind}")
        if value is not None and value > 0:
            return kind, value
    return None


def section(
    facts: FactStore,
    *,
    steps: int | None,
    steps_reason: str | None,
    tokens_seen: float | None,
    tokens_per_step: float | None,
    tokens_per_step_source: str,
    tokens_per_s: float | None,
    step_time_s: float | None,
    flops_per_token: float | None,
    flops_reason: str | None,
    finished: bool,
) -> Section:
    """budget, budget_tokens, progress, eta_s, flops_required, flops_remaining."""
    out = Section()
    absent, values = out.absent, out.values
    declared = _declared(facts)
    if declared is None:
        absent["progress"] = absent["eta_s"] = _BUDGET_FLAGS
        absent["flops_required"] = absent["flops_remaining"] = _BUDGET_FLAGS
        return out
    kind, value = declared
    fact = facts.get(f"budget_{kind}")
    values["budget"] = {"unit": kind, "value": value, "source": fact.source if fact else None}
    budget_in = explain.given(
        f"budget_{kind}", value, kind if kind != "flops" else "FLOP", f"declared with --budget-{kind}"
    )
    tokens_budget: float | None = None
    expr, inputs = "budget_tokens", [budget_in]
    if kind == "tokens":
        tokens_budget = value
    elif kind == "steps" and tokens_per_step:
        tokens_budget = value * tokens_per_step
        expr = "budget_steps * tokens_per_step"
        inputs = [budget_in, explain.given(
            "tokens_per_step", tokens_per_step, "tokens/step", tokens_per_step_source
        )]
    elif kind == "flops" and flops_per_token:
        tokens_budget = value / flops_per_token
        expr = "budget_flops / flops_per_token"
        inputs = [budget_in, explain.given(
            "flops_per_token", flops_per_token, "FLOP/token", "see flops_per_token"
        )]
    if kind == "steps" and tokens_budget is None:
        absent["budget_tokens"] = "tokens per step unknown: declare --tokens-per-step"
    if steps is None or (kind != "steps" and tokens_budget is not None and tokens_seen is None):
        why = f"needs the steps and tokens seen: {steps_reason or 'not counted'}"
        absent["progress"] = absent["eta_s"] = why
    elif kind == "steps":
        _by_steps(out, value, steps, step_time_s, finished, budget_in)
    elif tokens_budget is None:
        absent["progress"] = absent["eta_s"] = (
            "a FLOPs budget needs FLOPs per token: declare --flops-per-token or the model shape"
        )
    elif kind == "flops":
        _by_flops(out, value, tokens_seen, flops_per_token, tokens_per_s, finished, budget_in)  # type: ignore[arg-type]
    else:
        _by_tokens(out, tokens_budget, tokens_seen, tokens_per_s, finished, expr, inputs)  # type: ignore[arg-type]
    if tokens_budget is not None:
        values["budget_tokens"] = tokens_budget
    if tokens_budget is None or not flops_per_token:
        why = (
            f"needs FLOPs per token: {flops_reason}"
            if not flops_per_token
            else "needs the budget in tokens: " + absent.get("budget_tokens", "unknown")
        )
        absent["flops_required"] = absent["flops_remaining"] = why
    else:
        values["flops_required"] = flops_per_token * tokens_budget
        if tokens_seen is None:
            absent["flops_remaining"] = "the tokens seen are not counted"
        else:
            values["flops_remaining"] = max(flops_per_token * (tokens_budget - tokens_seen), 0.0)
    return out


def _by_tokens(
    out: Section,
    tokens_budget: float,
    tokens_seen: float,
    tokens_per_s: float | None,
    finished: bool,
    expr: str,
    inputs: list[dict[str, Any]],
) -> None:
    seen = explain.given("tokens_seen", tokens_seen, "tokens", "see tokens_seen")
    progress = tokens_seen / tokens_budget
    out.values["progress"] = progress
    divisor = expr if expr == "budget_tokens" else f"({expr})"
    out.explain["progress"] = explain.explanation(
        progress, "fraction", f"tokens_seen / {divisor}", [seen, *inputs],
        note="the budget in tokens; 1.0 is the whole budget",
    )
    if finished:
        out.absent["eta_s"] = "the run has ended"
    elif not tokens_per_s:
        out.absent["eta_s"] = "tokens/s not measured yet (the first reports are warm-up)"
    else:
        eta = formulas.eta_seconds(tokens_budget - tokens_seen, tokens_per_s)
        out.values["eta_s"] = eta
        rate = explain.given("tokens_per_s", tokens_per_s, "tokens/s", "see tokens_per_s")
        out.explain["eta_s"] = explain.explanation(
            eta, "s", f"max({expr} - tokens_seen, 0) / tokens_per_s", [seen, *inputs, rate],
            note="the tokens left at the current rate",
        )


def _by_flops(
    out: Section,
    budget_flops: float,
    tokens_seen: float,
    flops_per_token: float,
    tokens_per_s: float | None,
    finished: bool,
    budget_in: dict[str, Any],
) -> None:
    seen = explain.given("tokens_seen", tokens_seen, "tokens", "see tokens_seen")
    fpt = explain.given("flops_per_token", flops_per_token, "FLOP/token", "see flops_per_token")
    progress = tokens_seen * flops_per_token / budget_flops
    out.values["progress"] = progress
    out.explain["progress"] = explain.explanation(
        progress, "fraction", "tokens_seen * flops_per_token / budget_flops", [seen, fpt, budget_in],
        note="in FLOPs, the budget's unit: the FLOPs spent over the FLOPs declared",
    )
    if finished:
        out.absent["eta_s"] = "the run has ended"
    elif not tokens_per_s:
        out.absent["eta_s"] = "tokens/s not measured yet (the first reports are warm-up)"
    else:
        left = budget_flops - tokens_seen * flops_per_token
        eta = formulas.eta_seconds(left, tokens_per_s * flops_per_token)
        out.values["eta_s"] = eta
        rate = explain.given("tokens_per_s", tokens_per_s, "tokens/s", "see tokens_per_s")
        out.explain["eta_s"] = explain.explanation(
            eta, "s",
            "max(budget_flops - tokens_seen * flops_per_token, 0) / (tokens_per_s * flops_per_token)",
            [seen, fpt, budget_in, rate], note="the FLOPs left at the current rate",
        )


def _by_steps(
    out: Section,
    budget_steps: float,
    steps: int,
    step_time_s: float | None,
    finished: bool,
    budget_in: dict[str, Any],
) -> None:
    done = explain.given("steps", steps, "steps", "optimizer steps counted by the agent")
    progress = steps / budget_steps
    out.values["progress"] = progress
    out.explain["progress"] = explain.explanation(
        progress, "fraction", "steps / budget_steps", [done, budget_in],
        note="in steps, the budget's unit",
    )
    if finished:
        out.absent["eta_s"] = "the run has ended"
    elif not step_time_s:
        out.absent["eta_s"] = "step time not measured yet"
    else:
        eta = formulas.eta_seconds(budget_steps - steps, 1.0 / step_time_s)
        out.values["eta_s"] = eta
        out.explain["eta_s"] = explain.explanation(
            eta, "s", "max(budget_steps - steps, 0) * step_time_s",
            [done, budget_in, explain.given("step_time_s", step_time_s, "s", "see step_time_s")],
            note="the steps left at the current step time",
        )


def plan(
    facts: FactStore,
    *,
    mfu: dict[str, Any] | None,
    mfu_reason: str | None,
    tokens_per_s: float | None,
    peak_flops: float | None,
    n_gpus: int | None,
    flops_per_token: float | None,
    elapsed_s: float | None,
    finished: bool,
    eta_s: float | None,
    eta_reason: str | None,
    budget_tokens: float | None,
) -> Section:
    """plan: what was declared (--plan-mfu, --plan-hours) next to what is measured or projected."""
    out = Section()
    planned_mfu, planned_hours = facts.number("plan_mfu"), facts.number("plan_hours")
    if planned_mfu is None and planned_hours is None:
        out.absent["plan"] = "declare --plan-mfu and --plan-hours to compare the plan with the run"
        return out
    mfu = mfu or {}
    result: dict[str, Any] = {}
    if planned_mfu is not None:
        result["mfu"] = dict(
            planned=planned_mfu, measured=mfu.get("value"), convention=mfu.get("convention")
        )
        if mfu.get("value") is None:
            out.absent["plan.mfu.measured"] = f"MFU is not known: {mfu_reason or 'no convention chosen'}"
        if flops_per_token and peak_flops and n_gpus:
            rate = planned_mfu * n_gpus * peak_flops / flops_per_token
            result["tokens_per_s"] = dict(planned=rate, measured=tokens_per_s)
            out.explain["plan"] = explain.explanation(
                rate, "tokens/s", "plan_mfu * n_gpus * peak_flops / flops_per_token",
                [
                    explain.given("plan_mfu", planned_mfu, "fraction", "declared with --plan-mfu"),
                    explain.given("n_gpus", n_gpus, "GPUs", "see mfu"),
                    explain.given("peak_flops", peak_flops, "FLOP/s per GPU", "see mfu"),
                    explain.given("flops_per_token", flops_per_token, "FLOP/token",
                                  "see flops_per_token"),
                ],
                note="the tokens/s the planned MFU means on these GPUs, to set beside the "
                "measured tokens/s",
            )
        else:
            out.absent["plan.tokens_per_s"] = (
                "the planned tokens/s needs FLOPs per token, the dense peak and the GPU count"
            )
    if planned_hours is not None:
        projected: float | None = None
        if finished and elapsed_s is not None:
            projected = elapsed_s / 3600.0
            formula, inputs = "elapsed_s / 3600", [
                explain.given("elapsed_s", elapsed_s, "s", "wall time of the run (see time)")
            ]
        elif elapsed_s is not None and eta_s is not None:
            projected = (elapsed_s + eta_s) / 3600.0
            formula, inputs = "(elapsed_s + eta_s) / 3600", [
                explain.given("elapsed_s", elapsed_s, "s", "wall time so far (see time)"),
                explain.given("eta_s", eta_s, "s", "see eta_s"),
            ]
        else:
            out.absent["plan.hours.projected"] = (
                "needs the elapsed time and the ETA: " + (eta_reason or "the run has not started")
            )
        result["hours"] = dict(planned=planned_hours, projected=projected)
        if projected is not None:
            entry = explain.explanation(
                projected, "h", formula, [explain.given(  # type: ignore[possibly-undefined]
                    "plan_hours", planned_hours, "h", "declared with --plan-hours (for comparison)"
                ), *inputs],  # type: ignore[possibly-undefined]
                note="the run's hours, projected to the end of the budget",
            )
            out.explain["plan" if "plan" not in out.explain else "plan_hours"] = entry
    if budget_tokens is not None:
        result["budget_tokens"] = budget_tokens
    out.values["plan"] = result
    return out
