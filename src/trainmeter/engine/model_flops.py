"""FLOPs per token of the model, and the FLOPs spent so far: declared, else from the model
shape under the chosen convention, else the range over every convention (never a guess of one).
"""

from __future__ import annotations

from typing import Any

from . import explain, flops, models
from .facts import FactStore, rank
from .flops import ModelShape, all_conventions, flops_per_token, formulas
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
#: Facts that refine the shape (MoE, attention width, windows, packing): see ModelShape.
REFINE_KEYS = (
    "attn_width",
    "n_lookup_params",
    "moe_routed_params",
    "moe_experts",
    "moe_top_k",
    "moe_router_params",
    "n_vector_params",
)


def _windows(facts: FactStore, n_layers: int) -> tuple[int | None, ...] | None:
    """Per-layer windows (None: full attention), when the fact has one entry a layer."""
    value = facts.value("attn_windows")
    if not isinstance(value, list) or len(value) != n_layers:
        return None
    out: list[int | None] = []
    for w in value:
        if w is None:
            out.append(None)
        elif isinstance(w, (int, float)) and not isinstance(w, bool) and w > 0:
            out.append(int(w))
        else:
            return None
    return tuple(out) if any(w is not None for w in out) else None


def shape_of(facts: FactStore) -> ModelShape | None:
    """The model's shape from the facts (None while one of `SHAPE_KEYS` is unknown); derived
    once per version of the facts (a snapshot asks several times, a replay thousands)."""
    return facts.derived("shape", lambda: _shape_of(facts))  # type: ignore[no-any-return]


def _shape_of(facts: FactStore) -> ModelShape | None:
    if models.trained(facts) is not None:
        return None  # several models trained together: no single shape (engine/models.py)
    values = [facts.number(k) for k in SHAPE_KEYS]
    if any(v is None for v in values):
        return None
    refine = {k: facts.number(k) for k in REFINE_KEYS}
    segment = facts.number("segment_len")
    return ModelShape(
        *(int(v) for v in values),  # type: ignore[arg-type]
        **{k: int(v) for k, v in refine.items() if v is not None and v > 0},
        windows=_windows(facts, int(values[2])),  # type: ignore[arg-type]
        segment_len=segment if segment and segment > 0 else None,
    )


def provenance(facts: FactStore, key: str) -> str:
    """'detected (config of TinyGPT)': a fact's source and its note."""
    fact = facts.get(key)
    if fact is None:
        return "unknown"
    return f"{fact.source} ({fact.note})" if fact.note else fact.source


def choose(
    facts: FactStore, warnings: list[str] | None = None
) -> tuple[dict[str, Any] | None, str | None]:
    """(the `flops_per_token` entry, or None with the reason it is absent); its warnings added
    to `warnings`. Worked out once per version of the facts (`_choose`): a new entry each call."""
    # again after a convention is registered or removed (the registry's generation moved)
    fpt, reason, said = facts.derived("flops_per_token", lambda: _choose(facts), flops.generation())
    if warnings is not None:
        warnings.extend(said)
    return (None if fpt is None else dict(fpt)), reason


def _choose(facts: FactStore) -> tuple[dict[str, Any] | None, str | None, list[str]]:
    said: list[str] = []
    fpt, reason = _chosen(facts, said)
    return fpt, reason, said


def _chosen(
    facts: FactStore, warnings: list[str]
) -> tuple[dict[str, Any] | None, str | None]:
    conv = facts.get("convention")
    conv_name = conv.value if conv is not None else None
    if conv_name is not None and conv_name not in flops.REGISTRY:
        warnings.append(
            f"convention {conv_name!r} is not one of {', '.join(flops.names())}: the range "
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
    several = models.several_reason(facts)
    if several is not None:
        return None, several
    shape = shape_of(facts)
    if shape is None:
        missing = [k for k in SHAPE_KEYS if facts.number(k) is None]
        flags = ", ".join(SHAPE_FLAGS[k] for k in missing)
        return None, (
            f"the model shape is incomplete (missing {', '.join(missing)}): declare {flags}, "
            "or --flops-per-token"
        )
    source = max((facts.get(k).source for k in SHAPE_KEYS), key=rank)  # type: ignore[union-attr]
    params = (
        {"params": {"total": shape.n_params, "active": _whole(shape.active)}}
        if shape.is_moe else {}
    )
    note = _attention_note(shape, conv_name)
    if note:
        params["note"] = note
    if conv_name in flops.REGISTRY:
        return {
            "value": flops_per_token(shape, conv_name),
            "convention": conv_name,
            "formula": flops.get(conv_name).formula,
            "source": source,
            **params,
        }, None
    spread = sorted(all_conventions(shape).values())
    return dict(
        value=None,
        convention="not chosen",
        source=source,
        range=[spread[0], spread[-1]],
        **params,
    ), None


def _attention_note(shape: ModelShape, conv: Any) -> str | None:
    """What the attention term did with windows and packed documents, in words."""
    parts = []
    if shape.windows:
        local = sum(1 for w in shape.windows if w is not None)
        parts.append(
            f"{local} of {shape.n_layers} layers attend over a window: min(window, T) on those"
        )
    if shape.segment_len is not None:
        length = min(shape.segment_len, shape.seq_len)
        if isinstance(conv, str) and conv in flops.REGISTRY and flops.get(conv).real_lengths:
            parts.append(
                f"packed documents: attention counted over their real lengths "
                f"(sum of L_i^2 / sum of L_i = {length:g} tokens, not T = {shape.seq_len})"
            )
        else:
            parts.append(
                f"packed documents (mean attended length {length:g} of T = {shape.seq_len}): "
                "this convention counts attention over T, as its source does; "
                + _real_lengths_say()
            )
    return "; ".join(parts) or None


def _real_lengths_say() -> str:
    """'megatron counts the real lengths': the conventions that count packed documents so."""
    real = [c.name for c in flops.REGISTRY.values() if c.real_lengths]
    if not real:
        return "no convention counts the real lengths"
    return f"{', '.join(real)} count{'s' if len(real) == 1 else ''} the real lengths"


def _whole(x: float) -> float | int:
    return int(x) if float(x).is_integer() else x


def _per_token_and_spent(
    out: Section, fpt: dict[str, Any] | None, reason: str | None, tokens_seen: float | None
) -> bool:
    """flops_per_token and flops_spent into `out` (each a value or its absent reason), for
    `section` and `sample_section` alike; True when FLOPs per token has a number (`section`
    then explains it)."""
    if fpt is None:
        out.absent["flops_per_token"] = reason  # type: ignore[assignment]
        out.absent["flops_spent"] = f"needs FLOPs per token: {reason}"
        return False
    out.values["flops_per_token"] = fpt
    if fpt["value"] is None:
        out.absent["flops_spent"] = "no convention chosen: declare --convention " + "|".join(
            flops.names()
        )
        return False
    if tokens_seen is None:
        out.absent["flops_spent"] = "needs the tokens seen, which are not counted"
    else:
        out.values["flops_spent"] = fpt["value"] * tokens_seen
    return True


def section(facts: FactStore, tokens_seen: float | None) -> Section:
    """flops_per_token, flops_spent, conventions, convention_formulas."""
    out = Section()
    fpt, reason = choose(facts, out.warnings)
    shape = shape_of(facts)
    if _per_token_and_spent(out, fpt, reason, tokens_seen):
        out.explain["flops_per_token"] = facts.derived(
            "flops_per_token.explain", lambda: _explain(facts, fpt, shape), flops.generation()
        )
    if shape is not None:
        out.values["conventions"] = all_conventions(shape)
    out.values["convention_formulas"] = formulas()
    return out


def sample_section(facts: FactStore, tokens_seen: float | None) -> Section:
    """`section`'s values and absent reasons, for `Engine.sample` (which hands on neither its
    explanation nor its warnings): all but flops_spent follow from the facts and the registry
    alone, so they are worked out once per version of them and the same entries are given
    again (a replay takes 2,000 samples); flops_spent, the tokens times FLOPs per token, each
    call."""
    fpt, reason, conventions, conv_formulas = facts.derived(
        "model.sample", lambda: _sample_base(facts), flops.generation()
    )
    out = Section()
    _per_token_and_spent(out, fpt, reason, tokens_seen)
    if conventions is not None:
        out.values["conventions"] = conventions
    out.values["convention_formulas"] = conv_formulas
    return out


def _sample_base(
    facts: FactStore,
) -> tuple[dict[str, Any] | None, str | None, dict[str, float] | None, dict[str, str]]:
    """What `section` gives that does not move with the tokens: (the flops_per_token entry or
    None with its reason, the conventions, their formulas)."""
    fpt, reason = choose(facts)
    shape = shape_of(facts)
    return fpt, reason, all_conventions(shape) if shape is not None else None, formulas()


def expression(shape: ModelShape, conv: str) -> str:
    """The convention's formula over only the symbols this shape uses (a plain dense model
    reads 6 * (N - E) + 12 * L * d * T)."""
    return flops.get(conv).expression(shape)


def _refined_inputs(facts: FactStore, shape: ModelShape, conv: str) -> list[dict[str, Any]]:
    """The inputs beyond N, E, L, d, T that `expression` names."""
    out: list[dict[str, Any]] = []
    formula = expression(shape, conv)

    def add(symbol: str, value: Any, unit: str, source: str) -> None:
        if symbol in formula.replace("(", " ").replace(")", " ").split():
            out.append(explain.given(symbol, value, unit, source))

    if shape.is_moe:
        add(
            "routed",
            shape.moe_routed_params,
            "parameters",
            f"moe_routed_params: {provenance(facts, 'moe_routed_params')}",
        )
        add("top_k", shape.moe_top_k, "experts", f"moe_top_k: {provenance(facts, 'moe_top_k')}")
        add(
            "experts",
            shape.moe_experts,
            "experts",
            f"moe_experts: {provenance(facts, 'moe_experts')}",
        )
    add(
        "R",
        shape.moe_router_params,
        "parameters",
        f"moe_router_params: {provenance(facts, 'moe_router_params')}",
    )
    add(
        "V",
        shape.n_vector_params,
        "parameters",
        f"n_vector_params: {provenance(facts, 'n_vector_params')}",
    )
    add(
        "E_hf",
        shape.n_lookup_params,
        "parameters",
        f"n_lookup_params: {provenance(facts, 'n_lookup_params')}",
    )
    add("HQ", shape.attn_width, "width", f"attn_width: {provenance(facts, 'attn_width')}")
    if flops.get(conv).real_lengths and shape.segment_len is not None:
        length = min(shape.segment_len, shape.seq_len)
        how = (
            f"packed documents: sum of L_i^2 / sum of L_i = {length:g} tokens "
            f"({provenance(facts, 'segment_len')})"
        )
    else:
        length = shape.seq_len
        how = f"T = {length} tokens"
    if shape.windows:
        how += f", min(window, T) on each layer with a window ({provenance(facts, 'attn_windows')})"
    add(
        "sum_T",
        shape.layer_lengths(length),
        "tokens",
        f"sum over layers of the length a token attends over: {how}",
    )
    return out


def _explain(facts: FactStore, fpt: dict[str, Any], shape: ModelShape | None) -> dict[str, Any]:
    conv = fpt["convention"]
    if "formula" in fpt and shape is not None:
        formula = expression(shape, conv)
        names = formula.replace("(", " ").replace(")", " ").split()
        inputs = [
            explain.given(symbol, facts.number(key), unit, f"{key}: {provenance(facts, key)}")
            for key, (symbol, unit) in SYMBOLS.items()
            if symbol in names
        ]
        inputs += _refined_inputs(facts, shape, conv)
        for item in inputs:
            value = item["value"]
            item["value"] = int(value) if float(value).is_integer() else value
        return explain.explanation(
            fpt["value"], "FLOP/token", formula, inputs, convention=conv,
            note=f"training FLOPs (forward + backward) per token: {flops.get(conv).source}",
        )
    return explain.explanation(
        fpt["value"], "FLOP/token", "flops_per_token",
        [explain.given("flops_per_token", fpt["value"], "FLOP/token",
                       provenance(facts, "flops_per_token"))],
        convention=conv, note="given as is (--flops-per-token or emitted), not derived",
    )
