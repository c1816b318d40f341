"""Every number in a snapshot is finite: the last pass before a snapshot leaves the engine.

The inputs are bounded where they enter (flags, records), but a product or a rate of large
bounded inputs can still overflow to infinity (`1e308` CPU seconds over a short interval), and
an infinity or NaN makes `summary.json` unwritable as JSON and every view that formats it fail.
So any number that is not finite is taken out where it stands (set to None) and named in
`absent` with its path, like every other number the engine cannot give.
"""

from __future__ import annotations

import math
import re
import sys
from typing import Any

REASON = "not a finite number: an input was too large for it (overflow)"


#: A MessagePack float (0xcb) whose sign and exponent bits read 7ff or fff: an infinity or a NaN.
#: A regular expression: one search, not a `bytes.find` for each of the two leads.
_NOT_FINITE = re.compile(rb"\xcb[\x7f\xff][\xf0-\xff]")

#: msgspec's MessagePack encoder, made on the first check after msgspec was imported; False
#: where msgspec cannot be imported (every check is then the walk).
_encode: Any = None


def _encoder() -> Any:
    """The encoder, or None while msgspec is not imported yet: this module never imports it.
    A replay has it (its typed decoding); a live `tm` does not, and importing it at the first
    check (~19 ms with the typing_extensions it pulls in) put that time on `tm`'s start-up and
    its end after the child's exit, for a check that costs a live `tm` one walk a second."""
    global _encode
    msgspec = sys.modules.get("msgspec")
    if msgspec is None:
        return None
    try:
        _encode = msgspec.msgpack.Encoder().encode
    except (AttributeError, ImportError):  # a msgspec without MessagePack: the walk alone
        _encode = False
    return _encode


def _maybe_not_finite(obj: Any) -> bool:
    """False when no float in `obj` can be infinite or NaN; True when one may be, or when this
    cannot tell. Checked in C: MessagePack writes every float as 0xcb and its 8 IEEE 754 bytes,
    big-endian, and an infinity or a NaN is a float whose 11 exponent bits are all ones, so its
    first two bytes are 7f or ff, then f0 or more. Those three bytes found anywhere else (inside
    a string or in another value's bytes) answer True and the walk decides. An object it cannot
    encode (a float subclass such as numpy's, an integer past 64 bits) answers True as well.
    A sample of ~110 values: ~39k instructions (the encoding 23k, the search 14k), the walk
    90k."""
    encode = _encode if _encode is not None else _encoder()
    if not encode:  # False, or None: msgspec not imported (yet)
        return True
    try:
        data = encode(obj)
    except Exception:  # noqa: BLE001 - anything it cannot encode: the walk decides
        return True
    return _NOT_FINITE.search(data) is not None


def all_finite(obj: Any) -> bool:
    """Whether every float in `obj` (nested dicts and lists) is finite: the common answer, found
    without building a path for every container (a snapshot is checked at each look), and
    first without a Python step per value (`_maybe_not_finite`: a replay checks 2,000 samples).
    The walk answers wherever that cannot rule an infinity or a NaN out."""
    if not _maybe_not_finite(obj):
        return True
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
    `absent`. Returns how many were replaced. An explicit stack: no depth can overflow.

    `snap` itself is the caller's and is changed in place; the dicts and lists nested in it are
    not: a part's entry can be kept from one snapshot to the next (FLOPs per token per version
    of the facts), and replacing its infinity in place would leave the next snapshot a None
    with no reason named. So on this path, taken only when some float is not finite, every
    nested container is replaced in its parent by a copy before it is walked (a shallow copy a
    level, linear in the snapshot's size)."""
    if all_finite(snap):
        return 0
    replaced = 0
    stack: list[tuple[Any, str]] = [(snap, "")]
    while stack:
        item, path = stack.pop()
        keys = list(item) if type(item) is dict else range(len(item))
        for key in keys:
            value = item[key]
            kind = type(value)
            if kind is float:
                if not math.isfinite(value):
                    item[key] = None
                    absent.setdefault(f"{path}{key}", REASON)
                    replaced += 1
            elif kind is dict or kind is list:
                value = item[key] = dict(value) if kind is dict else list(value)  # ours to change
                stack.append((value, f"{path}{key}."))
    return replaced
