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


def moving_average(
    name: str, unit: str, latest: str, previous: float | None, alpha: float
) -> tuple[str, list[dict[str, Any]]]:
    """Formula and inputs of the latest update of an exponential moving average of `latest`
    (an expression over inputs the caller adds): the first value is `latest` itself."""
    if previous is None:
        return latest, []
    return f"previous_average + alpha * ({latest} - previous_average)", [
        given(
            "previous_average",
            previous,
            unit,
            f"the moving average of {name} before the latest report",
        ),
        given("alpha", alpha, "1", "weight of the latest report in the moving average"),
    ]
