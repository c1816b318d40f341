"""The passport's model section: the shape the FLOPs were worked out from, and FLOPs per token
under every convention.

A model card reader checks MFU by redoing FLOPs per token by hand; that needs the shape (layers,
width, sequence length, parameters, embedding parameters) and which convention gave which count.
Each shape number keeps its provenance (detected or declared); a missing one is simply not listed.
"""

from __future__ import annotations

from typing import Any

from ..snapread import get_dict
from .format import si

#: (symbol in the formulas, fact key, words)
SHAPE = (
    ("L", "n_layers", "layers"),
    ("d", "d_model", "width (d_model)"),
    ("T", "seq_len", "sequence length"),
    ("N", "n_params", "parameters"),
    ("E", "n_embedding_params", "embedding parameters"),
)


def _fact(snap: dict[str, Any], key: str) -> dict[str, Any] | None:
    facts = get_dict(snap, "facts") or {}
    fact = facts.get(key)
    if isinstance(fact, dict) and isinstance(fact.get("value"), (int, float)):
        return fact
    return None


def model_section(snap: dict[str, Any]) -> dict[str, Any] | None:
    """{shape: [{symbol, name, value, source}], conventions: {name: {flops_per_token, formula}},
    chosen}, or None when the run knew neither a shape number nor a convention's count."""
    shape = []
    for symbol, key, words in SHAPE:
        fact = _fact(snap, key)
        if fact is not None:
            shape.append({"symbol": symbol, "name": words, "value": fact["value"],
                          "source": fact.get("source")})
    conventions = get_dict(snap, "conventions") or {}
    formulas = get_dict(snap, "convention_formulas") or {}
    fpt = get_dict(snap, "flops_per_token") or {}
    chosen = fpt.get("convention") if fpt.get("value") is not None else None
    table = {
        str(name): {"flops_per_token": value, "formula": formulas.get(name)}
        for name, value in sorted(conventions.items(), key=lambda kv: kv[1])
        if isinstance(value, (int, float))
    }
    models = get_dict(snap, "models") or {}
    trained = [m for m in models.get("trained") or [] if isinstance(m, dict)]
    if not shape and not table and not trained:
        return None
    out = {"shape": shape, "conventions": table, "chosen": chosen if chosen in table else None}
    if trained:
        out["models"] = {"trained": trained, "total_params": models.get("total_params")}
    return out


def model_markdown(model: dict[str, Any] | None, fmt: Any) -> list[str]:
    """The section as markdown lines (`fmt` formats a count, as the rest of the passport does)."""
    if not model:
        return []
    lines: list[str] = []
    models = model.get("models")
    if models:
        lines += ["### Models trained together", "", "| Model | Class | Parameters |",
                  "| --- | --- | --- |"]
        for m in models["trained"]:
            lines.append(f"| {m.get('name')} | {m.get('class')} | {si(m.get('params'))} |")
        total = models.get("total_params")
        if isinstance(total, (int, float)):
            lines.append(f"| total | | {si(total)} |")
        lines += ["", "FLOPs of the job are the counted step's (it runs every model): no "
                  "convention's formula counts more than one model.", ""]
    if model.get("shape"):
        lines += ["### Model shape", "", "| | Quantity | Value | Source |", "| --- | --- | --- | --- |"]
        for row in model["shape"]:
            value = row["value"]
            text = f"{int(value):,}" if float(value) == int(value) else fmt(value)
            lines.append(f"| {row['symbol']} | {row['name']} | {text} | {row.get('source') or ''} |")
        lines.append("")
    if model.get("conventions"):
        lines += ["### FLOPs per token by convention", "",
                  "| Convention | FLOPs/token | Formula |", "| --- | --- | --- |"]
        for name, row in model["conventions"].items():
            mark = " (chosen)" if name == model.get("chosen") else ""
            formula = f"`{row['formula']}`" if row.get("formula") else ""
            lines.append(f"| {name}{mark} | {fmt(row['flops_per_token'], 'FLOP')} | {formula} |")
        if model.get("chosen") is None:
            lines += ["", "No convention was chosen, so MFU is given as the range over these "
                      "(`--convention` picks one)."]
        lines.append("")
    return lines
