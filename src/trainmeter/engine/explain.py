"""How a derived number was computed, written so a person can redo it by hand.

An explanation is {value, unit, formula, inputs, convention?, peak_source?, note?}. `formula`
is plain text over the inputs' names (`*`, `/`, `+`, `-`, `min`, `max`, parentheses), so
putting each input's value in place of its name gives `value` back. Each input carries its
value, unit and provenance (where the number came from: declared, detected, measured, the
datasheet line...).
"""

from __future__ import annotations

from typing import Any


def given(name: str, value: Any, unit: str, source: str) -> dict[str, Any]:
    """One input of a formula."""
    return {"name": name, "value": value, "unit": unit, "source": source}


def explanation(
    value: float,
    unit: str,
    formula: str,
    inputs: list[dict[str, Any]],
    *,
    convention: str | None = None,
    peak_source: str | None = None,
    note: str | None = None,
) -> dict[str, Any]:
    entry: dict[str, Any] = {"value": value, "unit": unit, "formula": formula, "inputs": inputs}
    if convention is not None:
        entry["convention"] = convention
    if peak_source is not None:
        entry["peak_source"] = peak_source
    if note is not None:
        entry["note"] = note
    return entry
