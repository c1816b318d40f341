"""What one part of the engine gives the snapshot: its values, its absent reasons, its
explanations and its warnings.

Each part builds its own `Section` from inputs passed to it by name, so `snapshot.py` can
compose the parts in one visible order and no part reads another's keys out of a shared dict.
"""

from __future__ import annotations

from typing import Any


class Section:
    """A plain class, not a dataclass: the engine is imported by every `tm` run, and
    `dataclasses` costs milliseconds of start-up (it imports `inspect`)."""

    __slots__ = ("values", "absent", "explain", "warnings")

    def __init__(
        self,
        values: dict[str, Any] | None = None,
        absent: dict[str, str] | None = None,
        explain: dict[str, dict[str, Any]] | None = None,
        warnings: list[str] | None = None,
    ) -> None:
        self.values: dict[str, Any] = {} if values is None else values
        self.absent: dict[str, str] = {} if absent is None else absent
        self.explain: dict[str, dict[str, Any]] = {} if explain is None else explain
        self.warnings: list[str] = [] if warnings is None else warnings

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Section):
            return NotImplemented
        return (self.values, self.absent, self.explain, self.warnings) == (
            other.values, other.absent, other.explain, other.warnings,
        )

    __hash__ = None  # type: ignore[assignment]  # mutable, as the dataclass was

    def __repr__(self) -> str:
        return (
            f"Section(values={self.values!r}, absent={self.absent!r}, "
            f"explain={self.explain!r}, warnings={self.warnings!r})"
        )

    def merge(self, other: Section) -> None:
        """Take `other`'s entries in (later parts add, they never overwrite an earlier key)."""
        for key, value in other.values.items():
            self.values.setdefault(key, value)
        for key, reason in other.absent.items():
            self.absent.setdefault(key, reason)
        for key, entry in other.explain.items():
            self.explain.setdefault(key, entry)
        self.warnings.extend(other.warnings)

    def override(self, other: Section) -> None:
        """Take `other`'s entries in over earlier ones: the parts that read what the others
        found (samples, the waterfall, advice) say better where they speak, and a key they name
        absent leaves the values (a counted 0 tokens for a model that has none)."""
        for key, reason in other.absent.items():
            self.values.pop(key, None)
            self.absent[key] = reason
        self.values.update(other.values)
        self.explain.update(other.explain)
        self.warnings.extend(other.warnings)
