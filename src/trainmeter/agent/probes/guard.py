"""How a probe fails: it turns itself off, says so once on stderr, and the run goes on.

Invariant 1 forbids a probe from raising into the training loop. Every entry point of a probe
catches what it raised and calls `off()`, which warns once per probe and drops the probe's name
from `STATE.probes`, so `hello` and the engine stop believing a phase was measured.
"""

from __future__ import annotations

import sys

from ..state import STATE

_off: set[str] = set()


def off(probe: str, reason: object) -> None:
    """Mark `probe` broken for the rest of the process and warn once. Never raises."""
    try:
        if probe in _off:
            return
        _off.add(probe)
        if probe in STATE.probes:
            STATE.probes.remove(probe)
        text = reason if isinstance(reason, str) else repr(reason)
        print(f"trainmeter: {probe} off: {text}; the run goes on", file=sys.stderr)
    except Exception:  # noqa: BLE001 - stderr closed or similar: stay silent
        pass


def is_off(probe: str) -> bool:
    return probe in _off


def attached(probe: str) -> None:
    """Add `probe` to the names `hello` reports, once."""
    if probe not in _off and probe not in STATE.probes:
        STATE.probes.append(probe)
