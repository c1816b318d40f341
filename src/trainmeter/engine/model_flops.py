"""FLOPs per token of the model, and the FLOPs spent so far: declared, else from the model
shape under the chosen convention, else the range over every convention (never a guess of one).
"""

from __future__ import annotations

from typing import Any

from . import explain
from .facts import FactStore, rank
from .flops import CONVENTIONS, EXPRESSIONS, ModelShape, all_conventions, flops_per_token, formulas
from .section import Section

SHAPE_KEYS = ("n_params", "n_embedding_params", "n_layers", "d_model", "seq_len")
SHAPE_FLAGS = {
    "n_params": "--params",
    "n_embedding_params": "--embedding-params",
    "n_layers": "--layers",
    "d_model": "--d-model",
    "seq_len": "--seq-len",
}
#: Shape fact -> (symbol in the formulas, unit).
SYMBOLS = {
    "n_params": ("N", "parameters"),
    "n_embedding_params": ("E", "parameters"),
    "n_layers": ("L", "layers"),
    "d_model": ("d", "width"),
    "seq_len": ("T", "tokens"),
}


def shape_of(facts: FactStore) -> ModelShape | None:
    values = [facts.number(k) for k in SHAPE_KEYS]
    if any(v is None for v in values):
        return None
    return ModelShape(*(int(v) for v in values))  # type: ignore[arg-type]


def provenance(facts: FactStore, key: str) -> str:
    """'detected (config of TinyGPT)': a fact's source and its note."""
    fact = facts.get(key)
    if fact is None:
        return "unknown"
    return f"{fact.source} ({fact.note})" if fact.note else fact.source


def choose(
    facts: FactStore, warnings: list[str] | None = None
) -> tuple[dict[str, Any] | None, str | None]:
    """(the `flops_per_token` entry, or None with the reason it is absent)."""
    conv = facts.get("convention")
    conv_name = conv.value if conv is not None else None
    if warnings is not None and conv_name is not None and conv_name not in CONVENTIONS:
        warnings.append(
            f"convention {conv_name!r} is not one of {', '.join(CONVENTIONS)}: the range "
            "over all conventions is shown"
        )
    declared = facts.get("flops_per_token")
    value = facts.number("flops_per_token")
    if declared is not None and value is not None and value > 0:
        return {
            "value": value,
            "convention": conv_name if isinstance(conv_name, str) else "declared value",
            "source": declared.source,
        }, None
    shape = shape_of(facts)
    if shape is None:
        missing = [k for k in SHAPE_KEYS if facts.number(k) is None]
        flags = ", ".join(SHAPE_FLAGS[k] for k in missing)
        return None, (
            f"the model shape is incomplete (missing {', '.join(missing)}): declare {flags}, "
            "or --flops-per-token"
        )
    source = max((facts.get(k).source for k in SHAPE_KEYS), key=rank)  # type: ignore[union-attr]
    if conv_name in CONVENTIONS:
        return {
            "value": flops_per_token(shape, conv_name),
            "convention": conv_name,
            "formula": CONVENTIONS[conv_name][0],
            "source": source,
        }, None
    spread = sorted(all_conventions(shape).values())
    return dict(
        value=None, convention="not chosen", source=source, range=[spread[0], spread[-1]]
    ), None


def section(facts: FactStore, tokens_seen: float | None) -> Section:
    """flops_per_token, flops_spent, conventions, convention_formulas."""
    out = Section()
    fpt, reason = choose(facts, out.warnings)
    shape = shape_of(facts)
    if fpt is None:
        out.absent["flops_per_token"] = reason  # type: ignore[assignment]
        out.absent["flops_spent"] = f"needs FLOPs per token: {reason}"
    else:
        out.values["flops_per_token"] = fpt
        if fpt["value"] is None:
            out.absent["flops_spent"] = "no convention chosen: declare --convention " + "|".join(
                CONVENTIONS
            )
        else:
            out.explain["flops_per_token"] = _explain(facts, fpt, shape)
            if tokens_seen is None:
                out.absent["flops_spent"] = "needs the tokens seen, which are not counted"
            else:
                out.values["flops_spent"] = fpt["value"] * tokens_seen
    if shape is not None:
        out.values["conventions"] = all_conventions(shape)
    out.values["convention_formulas"] = formulas()
    return out


def _explain(facts: FactStore, fpt: dict[str, Any], shape: ModelShape | None) -> dict[str, Any]:
    conv = fpt["convention"]
    if "formula" in fpt and shape is not None:
        inputs = [
            explain.given(symbol, facts.number(key), unit, f"{key}: {provenance(facts, key)}")
            for key, (symbol, unit) in SYMBOLS.items()
        ]
        for item in inputs:
            value = item["value"]
            item["value"] = int(value) if float(value).is_integer() else value
        return explain.explanation(
            fpt["value"], "FLOP/token", EXPRESSIONS[conv], inputs, convention=conv,
            note=f"training FLOPs (forward + backward) per token: {CONVENTIONS[conv][1]}",
        )
    return explain.explanation(
        fpt["value"], "FLOP/token", "flops_per_token",
        [explain.given("flops_per_token", fpt["value"], "FLOP/token",
                       provenance(facts, "flops_per_token"))],
        convention=conv, note="given as is (--flops-per-token or emitted), not derived",
    )
