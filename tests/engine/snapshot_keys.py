"""The key paths of a snapshot, and the paths the contract table in docs/snapshot.md names.

A path is the keys from the top joined by dots: `mfu.value`. A dict whose keys are data (GPU
labels, convention names, series names, fact keys, ranks...) is a map, written with a
placeholder: `ladder.gpus.<gpu>.ofu`. A list of dicts is written `time.parts[].s`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

DOC = Path(__file__).resolve().parents[2] / "docs" / "snapshot.md"

#: map path -> placeholder for its keys
MAPS = {
    "ladder.gpus": "<gpu>",
    "gpus": "<gpu>",
    "energy.per_gpu": "<gpu>",
    "conventions": "<convention>",
    "convention_formulas": "<convention>",
    "mfu.by_convention": "<convention>",
    "counted.against_conventions": "<convention>",
    "series": "<series>",
    "facts": "<fact>",
    "explain": "<name>",
    "absent": "<name>",
    "ranks.step_time_s": "<rank>",
    "alerts[].step_time_s": "<rank>",
    "agent.versions": "<package>",
    "waterfall.absent": "<factor>",
    "log.reasons": "<reason>",
    "memory.ranks": "<rank>",
    "comm.ranks": "<rank>",
    "memory.ranks.<rank>.missing": "<field>",
}
#: values that are data, not structure (a fact's value may be a dict; declared maps)
OPAQUE = {"facts.<fact>.value", "facts.<fact>.conflicts[].value", "run.argv"}


def paths(value: Any, prefix: str = "") -> set[str]:
    out: set[str] = set()
    if prefix in OPAQUE:
        return out
    if isinstance(value, dict):
        placeholder = MAPS.get(prefix)
        for key, item in value.items():
            name = placeholder or key
            path = f"{prefix}.{name}" if prefix else name
            out.add(path)
            out |= paths(item, path)
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, dict):
                out |= paths(item, prefix + "[]")
    return out


def documented() -> set[str]:
    """The first column of every table row in docs/snapshot.md: `path`."""
    rows = re.findall(r"^\|\s*`([^`]+)`\s*\|", DOC.read_text(), flags=re.MULTILINE)
    return set(rows)


def undocumented(snap: dict[str, Any]) -> list[str]:
    return sorted(paths(snap) - documented())
