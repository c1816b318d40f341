"""The insight parts of a snapshot, added after the rest is built: samples (models without
tokens), the MFU waterfall and the advice. One entry point, so the snapshot calls one function.

Each part is guarded: a fault in one leaves that part absent with the error as its reason and
the rest of the snapshot (which every view and summary.json depend on) intact.
"""

from __future__ import annotations

from typing import Any

from . import advice, samples, waterfall


def add(snap: dict[str, Any], absent: dict[str, str], engine: Any) -> None:
    """Add `samples`, `waterfall` and `advice` to `snap` (reasons for what is missing to
    `absent`). Order matters: the waterfall of a model without tokens ends at the samples' MFU,
    and advice reads the alerts."""
    try:
        samples.add(snap, absent, engine)
    except Exception as exc:  # noqa: BLE001 - one part's fault must not cost the snapshot
        absent["samples_per_s"] = f"internal error while computing samples: {exc!r}"
    try:
        outside = _phases_outside_window(snap, engine.ledger)
        waterfall.add(snap, absent, engine.lookup, outside)
    except Exception as exc:  # noqa: BLE001 - one part failing is that part's absent reason
        snap.pop("waterfall", None)
        absent["waterfall"] = f"internal error while building the waterfall: {exc!r}"
    try:
        snap["advice"] = advice.advise(snap)
    except Exception as exc:  # noqa: BLE001 - one part failing is that part's absent reason
        snap["advice"] = []
        absent["advice"] = f"internal error while forming advice: {exc!r}"


def _phases_outside_window(snap: dict[str, Any], ledger: Any) -> float:
    """Seconds of measured phases (data, eval, checkpoints) recorded before rank 0's first step
    or, once the run has ended, after its last: they are outside the training window."""
    time = snap.get("time") or {}
    names = [
        p["name"]
        for p in time.get("parts") or []
        if p.get("measured") and p.get("name") in ("data", "checkpoint", "eval")
    ]
    before = sum(ledger.before.get(n, 0.0) for n in names)
    after = sum(ledger.tail.get(n, 0.0) for n in names) if time.get("finished") else 0.0
    return before + after
