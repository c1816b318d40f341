"""What one part of the engine gives the snapshot: its values, its absent reasons, its
explanations and its warnings.

Each part builds its own `Section` from inputs passed to it by name, so `snapshot.py` can
compose the parts in one visible order and no part reads another's keys out of a shared dict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Section:
    values: dict[str, Any] = field(default_factory=dict)
    absent: dict[str, str] = field(default_factory=dict)
    explain: dict[str, dict[str, Any]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def merge(self, other: Section) -> None:
        """Take `other`'s entries in (later parts add, they never overwrite an earlier key)."""
        for key, value in other.values.items():
            self.values.setdefault(key, value)
        for key, reason in other.absent.items():
            self.absent.setdefault(key, reason)
        for key, entry in other.explain.items():
            self.explain.setdefault(key, entry)
        self.warnings.extend(other.warnings)
