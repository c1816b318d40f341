"""Several models trained together (a GAN's generator and discriminator, an actor and a critic,
a teacher and a student, an encoder and a head on their own optimizers): each by name with its
parameters, and their total.

The agent's `models` fact lists them (`agent/probes/first_iteration.py`: the modules whose
parameters the optimizers of the first iteration stepped, each named by the variable that holds
it). A job of several models has no single shape, so the conventions' formulas (one model's
FLOPs per token) give the job nothing: FLOPs per token from them is absent with that reason,
and the FLOPs of the whole job come from the counted step, which runs every model (`counted`,
`samples`), or from a declared `--flops-per-token`.
"""

from __future__ import annotations

from typing import Any

from . import explain
from .facts import FactStore
from .section import Section


def trained(facts: FactStore) -> list[dict[str, Any]] | None:
    """The models of the `models` fact (name, class, params), when there are two or more."""
    value = facts.value("models")
    if not isinstance(value, list):
        return None
    out = []
    for item in value:
        if not isinstance(item, dict):
            continue
        params = item.get("params")
        if isinstance(params, bool) or not isinstance(params, (int, float)) or params < 0:
            continue
        out.append({
            "name": str(item.get("name") or "?"),
            "class": str(item.get("class") or "?"),
            "params": int(params),
        })
    return out if len(out) >= 2 else None


def listed(models: list[dict[str, Any]]) -> str:
    """'netD (Discriminator) 175,296, netG (Generator) 238,816'."""
    return ", ".join(f"{m['name']} ({m['class']}) {m['params']:,}" for m in models)


def several_reason(facts: FactStore) -> str | None:
    """Why the conventions' formulas give no FLOPs per token for this job, or None."""
    models = trained(facts)
    if models is None:
        return None
    return (
        f"{len(models)} models are trained together ({listed(models)} parameters): each "
        "convention's formula counts one model's FLOPs per token, and how much work each model "
        "does per token is not known, so no formula is used for the job. The counted step runs "
        "them all (counted, samples); or declare --flops-per-token"
    )


def section(facts: FactStore) -> Section:
    """`models`: the list, the total, and its explanation."""
    out = Section()
    models = trained(facts)
    if models is None:
        return out
    fact = facts.get("models")
    total = sum(m["params"] for m in models)
    out.values["models"] = {
        "trained": models,
        "total_params": total,
        "source": fact.source if fact is not None else "detected",
        "note": "the modules whose parameters the optimizers stepped, each named by the "
        "variable that holds it in the training code (else its class)",
    }
    symbols = _symbols(models)
    out.explain["models"] = explain.explanation(
        total, "parameters", " + ".join(symbols),
        [
            explain.given(sym, m["params"], "parameters", f"{m['name']} ({m['class']}): detected")
            for sym, m in zip(symbols, models, strict=True)
        ],
        note="parameters of the models trained together, each weight once; the FLOPs of the job "
        "are the counted step's (every model's forward and backward), never one model's formula",
    )
    return out


def _symbols(models: list[dict[str, Any]]) -> list[str]:
    """A formula name for each model: its own when it is an identifier, else model_<i>."""
    out: list[str] = []
    for i, m in enumerate(models, 1):
        name = m["name"]
        out.append(name if name.isidentifier() and name not in out else f"model_{i}")
    return out
