"""The keys a sample keeps, and which of their values the sample's finiteness check reads.

`Engine.sample` merges its parts' values into one dict (~40 keys) and keeps only what its
readers read (`keys`, the history's 14). The merged dict's keys, in order, are the same from
one sample to the next (the same parts give the same keys until an input appears or goes), so
what to keep, and which of the kept values the finiteness check must still read (the parts
that answered for their own floats are left out: `checked`), is worked out once per layout
and read with `operator.itemgetter` and `zip`, in C (no lambda: the memo pickles), where a Python step a key dropped or
kept was most of the merge's cost.
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
        """(the merged dict's `keys`, in its order: `merged` itself when `keys` is None; the
        values of those keys not in `checked`, for the finiteness check)."""
        layout = tuple(merged)
        memo = self._memo
        if (
            memo is None or memo[0] != layout or (memo[1] is not keys and memo[1] != keys)
            or (memo[2] is not checked and memo[2] != checked)
        ):
            wanted = layout if keys is None else tuple(k for k in layout if k in keys)
            rest = tuple(k for k in wanted if k not in checked)
            memo = self._memo = (
                layout, keys, checked, wanted, _getter(wanted), len(wanted), _getter(rest),
                len(rest),
            )
        kept = merged if keys is None else dict(
            zip(memo[3], _values(memo[4], memo[5], merged), strict=True)
        )
        return kept, _values(memo[6], memo[7], kept)
