"""One number of the passport with its provenance, and the builder that collects the numbers
and the reasons of those that are absent.

Each number's derivation comes from the engine's `snap["explain"][name]` when the engine wrote
one; otherwise from what the snapshot itself says (its `formula`, `source`, `convention` fields),
marked as such.
"""

from __future__ import annotations

from typing import Any


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def number_entry(
    value: float | list[float],
    unit: str,
    *,
    formula: str | None = None,
    inputs: list[dict[str, Any]] | None = None,
    source: str | None = None,
    explain: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """One number with its provenance; the engine's explanation wins where it has one."""
    entry: dict[str, Any] = {"value": value, "unit": unit}
    if explain:
        entry["formula"] = explain.get("formula") or formula
        entry["inputs"] = list(explain.get("inputs") or inputs or [])
        for key in ("convention", "peak_source", "note"):
            if explain.get(key):
                entry[key] = explain[key]
        entry["explained_by"] = "engine"
    else:
        if formula:
            entry["formula"] = formula
        entry["inputs"] = list(inputs or [])
        entry["explained_by"] = "snapshot"
    if source:
        entry["source"] = source
    for key, val in extra.items():
        if val is not None and key not in entry:
            entry[key] = val
    return entry


def input_entry(name: str, value: Any, unit: str, source: str) -> dict[str, Any]:
    return {"name": name, "value": value, "unit": unit, "source": source}


class Builder:
    def __init__(self, snap: dict[str, Any]) -> None:
        self.snap = snap
        self.explain = as_dict(snap.get("explain"))
        self.numbers: dict[str, dict[str, Any]] = {}
        self.absent: dict[str, str] = {
            str(k): str(v) for k, v in as_dict(snap.get("absent")).items()
        }

    def put(self, name: str, entry: dict[str, Any] | None, reason: str) -> None:
        if entry is not None:
            self.numbers[name] = entry
            self.absent.pop(name, None)
        else:
            self.absent.setdefault(name, reason)

    def ex(self, name: str) -> dict[str, Any] | None:
        found = self.explain.get(name)
        return found if isinstance(found, dict) else None
