"""The insight parts of a snapshot, added after the rest is built: samples (models without
tokens), the MFU waterfall and the advice. One entry point, so the snapshot calls one function."""

from __future__ import annotations

from typing import Any

from . import advice, samples, waterfall


def add(snap: dict[str, Any], absent: dict[str, str], engine: Any) -> None:
    """Add `samples`, `waterfall` and `advice` to `snap` (reasons for what is missing to
    `absent`). Order matters: the waterfall of a model without tokens ends at the samples' MFU,
    and advice reads the alerts."""
    samples.add(snap, absent, engine)
    waterfall.add(snap, absent, engine._lookup)
    snap["advice"] = advice.advise(snap)
