"""`tm summary`'s last group: each derived number with its formula, and each input with its value
and provenance.
"""

from __future__ import annotations

from typing import Any

from ..snapread import get_dict
from .summary_blocks import _text
from .terminal import number


def _value_with_unit(value: Any, unit: str) -> str:
    unit = "" if unit in ("1", "") else f" {unit}"  # "1": a pure number
    v = number(value)
    if v is None:
        return f"{value}{unit}"
    return f"{v:.6g}{unit}"


def explain(snap: dict[str, Any]) -> list[Any]:
    """Each derived number with its formula, and each input with its value and provenance."""
    from rich.padding import Padding

    entries = get_dict(snap, "explain") or {}
    mfu_entry = get_dict(snap, "mfu") or {}
    out: list[Any] = []

    def indented(*parts: Any) -> Any:
        return Padding(_text(*parts), (0, 0, 0, 4), expand=False)

    for name, entry in entries.items():
        if not isinstance(entry, dict):
            continue
        head = [(name, "bold"), " = ", (_value_with_unit(entry.get("value"), entry.get("unit") or ""), "bold")]
        if entry.get("convention"):
            head.append(f"  ({entry['convention']})")
        out.append(_text(*head))
        if entry.get("formula"):
            out.append(indented((str(entry["formula"]), "cyan")))
        for inp in entry.get("inputs") or []:
            if not isinstance(inp, dict):
                continue
            src = f"  [{inp['source']}]" if inp.get("source") else ""
            out.append(indented(f"{inp.get('name')} = ",
                                (_value_with_unit(inp.get("value"), inp.get("unit") or ""), "bold"),
                                (src, "dim")))
        if entry.get("peak_source"):
            same = entry["peak_source"] == mfu_entry.get("peak_source")
            out.append(indented(("peak source: " + ("as under MFU above" if same else str(entry["peak_source"])), "dim")))
        if entry.get("note"):
            out.append(indented((f"note: {entry['note']}", "dim")))
    return out
