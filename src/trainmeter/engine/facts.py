"""Facts about the run with their provenance, and what happens when sources disagree.

Invariant 2: every number has a source, and a disagreement is kept and shown, not silently
resolved. So the store remembers the latest value from each source; the one shown is the one
from the most trusted source (declared > emitted > tapped > detected > measured > assumed), and
the others that differ are listed as conflicts beside it.
"""

from __future__ import annotations

import math
from typing import Any

#: Most trusted first.
PRECEDENCE = ("declared", "emitted", "tapped", "detected", "measured", "assumed")
_RANK = {name: i for i, name in enumerate(PRECEDENCE)}


def rank(source: str | None) -> int:
    """Lower is more trusted; an unknown source ranks below `assumed`."""
    return _RANK.get(source or "", len(PRECEDENCE))


class Fact:
    """One source's statement: value, source, note. Immutable, compared by its three fields
    (a plain class: `dataclasses` is slow to import, see `section.py`)."""

    __slots__ = ("value", "source", "note")
    value: Any
    source: str
    note: str | None

    def __init__(self, value: Any, source: str, note: str | None = None) -> None:
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "source", source)
        object.__setattr__(self, "note", note)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")

    def _fields(self) -> tuple[Any, str, str | None]:
        return (self.value, self.source, self.note)

    def __eq__(self, other: object) -> bool:
        return self._fields() == other._fields() if isinstance(other, Fact) else NotImplemented

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return f"Fact(value={self.value!r}, source={self.source!r}, note={self.note!r})"


def same_value(a: Any, b: Any) -> bool:
    """Equal, with numbers compared to a relative 1e-9 (an int and its float are the same)."""
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if isinstance(a, bool) or isinstance(b, bool):
            return a is b
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=0.0)
    return a == b


class FactStore:
    """key -> the latest fact from each source; `get` answers with the most trusted."""

    def __init__(self) -> None:
        self._by_key: dict[str, dict[str, Fact]] = {}
        self._best: dict[str, Fact] = {}
        #: grows with every statement offered: what is derived from the facts alone (the model's
        #: shape) is kept in `memo` with the version it was derived at, and derived again after
        self.version = 0
        self.memo: dict[str, tuple[int, Any]] = {}

    def offer(self, key: str, value: Any, source: str | None, note: str | None = None) -> None:
        """Record what `source` says about `key`. A None value is no statement."""
        if value is None:
            return
        src = source if isinstance(source, str) and source else "detected"
        self.version += 1
        per_source = self._by_key.setdefault(key, {})
        fact = Fact(value, src, note if isinstance(note, str) else None)
        per_source[src] = fact
        best = self._best.get(key)
        if best is None or rank(src) <= rank(best.source):
            self._best[key] = fact

    def touch(self) -> None:
        """Something read beside the facts by what is derived from them moved (the engine's
        device facts, kept apart: a sample's GPU part): derive it all again."""
        self.version += 1

    def derived(self, key: str, compute: Any, inputs: Any = None) -> Any:
        """`compute()`, kept in `memo` under `key` until the next statement (or until `inputs`,
        what it reads besides the facts, differ): what follows from the facts (the shape,
        FLOPs per token, their explanation, the peak for these GPUs) is worked out once per
        version of them, however many snapshots and samples ask (a replay takes 2,000)."""
        memo = self.memo.get(key)
        if memo is not None and memo[0] == self.version and memo[2] == inputs:
            return memo[1]
        value = compute()
        self.memo[key] = (self.version, value, inputs)
        return value

    def get(self, key: str) -> Fact | None:
        return self._best.get(key)

    def value(self, key: str) -> Any:
        fact = self._best.get(key)
        return None if fact is None else fact.value

    def number(self, key: str) -> float | None:
        """The value as a float, or None when it is absent or not a finite number."""
        value = self.value(key)
        if isinstance(value, bool):
            return None
        try:
            number = float(value)
        except (TypeError, ValueError):
            return None
        return number if math.isfinite(number) else None

    def keys(self) -> list[str]:
        return sorted(self._best)

    def conflicts(self, key: str) -> list[Fact]:
        """Facts from other sources whose value differs from the one shown."""
        best = self._best.get(key)
        if best is None:
            return []
        others = [
            f
            for src, f in self._by_key[key].items()
            if src != best.source and not same_value(f.value, best.value)
        ]
        return sorted(others, key=lambda f: rank(f.source))

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """{key: {value, source, note, conflicts: [{value, source}]}} for every known key."""
        out: dict[str, dict[str, Any]] = {}
        for key in sorted(self._best):
            best = self._best[key]
            out[key] = {
                "value": best.value,
                "source": best.source,
                "note": best.note,
                "conflicts": [{"value": f.value, "source": f.source} for f in self.conflicts(key)],
            }
        return out
