"""Every number in a snapshot is finite: the last pass before a snapshot leaves the engine.

The inputs are bounded where they enter (flags, records), but a product or a rate of large
bounded inputs can still overflow to infinity (`1e308` CPU seconds over a short interval), and
an infinity or NaN makes `summary.json` unwritable as JSON and every view that formats it fail.
So any number that is not finite is taken out where it stands (set to None) and named in
`absent` with its path, like every other number the engine cannot give.
"""

from __future__ import annotations

import math
from typing import Any

REASON = "not a finite number: an input was too large for it (overflow)"


def all_finite(obj: Any) -> bool:
    """Whether every float in `obj` (nested dicts and lists) is finite: the common answer, found
    without building a path for every container (a snapshot is checked at each look)."""
    stack = [obj]
    pop, push = stack.pop, stack.append
    while stack:
        item = pop()
        for value in item.values() if type(item) is dict else item:
            kind = type(value)
            if kind is float:
                if value - value != 0.0:  # infinite or NaN
                    return False
            elif kind is dict or kind is list:
                push(value)
    return True


def finite_only(snap: dict[str, Any], absent: dict[str, str]) -> int:
    """Replace each non-finite float in `snap` (nested dicts and lists) by None and name it in
    `absent`. Returns how many were replaced. An explicit stack: no depth can overflow."""
    if all_finite(snap):
        return 0
    replaced = 0
    stack: list[tuple[Any, str]] = [(snap, "")]
    while stack:
        item, path = stack.pop()
        keys = item.keys() if type(item) is dict else range(len(item))
        for key in keys:
            value = item[key]
            kind = type(value)
            if kind is float:
                if not math.isfinite(value):
                    item[key] = None
                    absent.setdefault(f"{path}{key}", REASON)
                    replaced += 1
            elif kind is dict or kind is list:
                stack.append((value, f"{path}{key}."))
    return replaced
