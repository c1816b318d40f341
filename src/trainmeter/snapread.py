"""Reading numbers out of a snapshot (or any JSON-shaped dict), one way everywhere.

A snapshot is plain JSON: a number may be missing, `null`, a string where an old version wrote
one, or (in a hand-edited or damaged file) not finite. Every reader wants the same thing: a
finite float, or None, never a zero standing in for unknown. `finite` is that rule; `get` walks
a dotted path (`get(snap, "mfu.value")`) without an `isinstance(..., dict)` guard at each level.
Standard library only: the engine, the exporters and the views all use it.
"""

from __future__ import annotations

import math
from typing import Any


def finite(value: Any) -> float | None:
    """`value` as a float when it is a finite int or float (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        value = float(value)
    except OverflowError:  # an integer past a float's range is not a number we can use
        return None
    return value if math.isfinite(value) else None


def finite_value(value: Any) -> float | None:
    """`finite`, looking inside a `{"value": x, ...}` entry (the snapshot's shape for a number
    with its provenance: `mfu`, `n_gpus`, ...)."""
    if isinstance(value, dict):
        value = value.get("value")
    return finite(value)


def get(snap: Any, path: str, default: Any = None) -> Any:
    """The value at a dotted `path` (`"mfu.value"`, `"time.goodput"`), or `default` when a
    level is missing or not an object."""
    node = snap
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            return default
        node = node[key]
    return node


def get_dict(snap: Any, path: str) -> dict[str, Any] | None:
    """The object (a dict) at `path`, or None when a level is missing or it is not an object:
    `get_dict(snap, "run") or {}` for a section read field by field."""
    node = get(snap, path)
    return node if isinstance(node, dict) else None


def get_number(snap: Any, path: str) -> float | None:
    """`finite(get(snap, path))`: the finite number at `path`, or None."""
    return finite(get(snap, path))
