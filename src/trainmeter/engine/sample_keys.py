"""The keys a sample keeps, and which of their values the sample's finiteness check reads.

`Engine.sample` merges its parts' values into one dict and keeps only what its
readers read (`keys`, the history's 14). Its ~20 keys, in order, are the same from
one sample to the next (the same parts give the same keys until an input appears or goes), so
what to keep, and which of the kept values the finiteness check must still read (the parts
that answered for their own floats are left out: `checked`), is worked out once per layout:
the keys not wanted are then deleted without a set made each time, and the values to check read
with `operator.itemgetter`, in C (no lambda: the memo pickles).
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any


def _getter(names: tuple[str, ...]) -> itemgetter[Any] | None:
    """`itemgetter` of `names` (None for none); with one name it gives the value, not a tuple
    (`_values`)."""
    return itemgetter(*names) if names else None


def _values(get: itemgetter[Any] | None, n: int, d: dict[str, Any]) -> tuple[Any, ...]:
    """The values `get` (`_getter` of `n` names) reads from `d`, as a tuple."""
    if n > 1:
        return get(d)  # type: ignore[misc, no-any-return]
    return (get(d),) if n else ()  # type: ignore[misc]


class KeyPicker:
    """`pick` with the layout it last worked out."""

    __slots__ = ("_memo",)

    def __init__(self) -> None:
        self._memo: tuple[Any, ...] | None = None

    def pick(
        self, merged: dict[str, Any], keys: frozenset[str] | None, checked: frozenset[str]
    ) -> tuple[dict[str, Any], tuple[Any, ...]]:
        """(`merged` cut to `keys`, in place: the keys not wanted deleted, the others keep their
        order; the values of those kept not in `checked`, for the finiteness check)."""
        layout = tuple(merged)
        memo = self._memo
        if (
            memo is None or memo[0] != layout or (memo[1] is not keys and memo[1] != keys)
            or (memo[2] is not checked and memo[2] != checked)
        ):
            drop = () if keys is None else tuple(k for k in layout if k not in keys)
            rest = tuple(k for k in layout if k not in drop and k not in checked)
            memo = self._memo = (layout, keys, checked, drop, _getter(rest), len(rest))
        for key in memo[3]:  # a few: deleting them costs less than copying those kept
            del merged[key]
        return merged, _values(memo[4], memo[5], merged)
