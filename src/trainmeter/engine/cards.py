"""Each GPU model's spec, looked up once by its name and carried.

The dense peak MFU divides by (`peak.py`), the GPU counters' OFU and observed FLOPs
(`counters.py`) and, through the counters, the waterfall's tensor clocks all read a card's
spec. The table is searched once per name for the engine's life (`hardware.specs.lookup` scans
every card's names), not once per part and per snapshot, and every part reads the same object.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..hardware.specs import DeviceSpec


class Cards:
    """`spec(name)`: the card's spec or None, the lookup asked once per name."""

    __slots__ = ("_lookup", "_known")

    def __init__(self, lookup: Callable[[str], DeviceSpec | None]) -> None:
        self._lookup = lookup
        self._known: dict[str, DeviceSpec | None] = {}

    def spec(self, name: str) -> DeviceSpec | None:
        try:
            return self._known[name]
        except KeyError:
            found = self._known[name] = self._lookup(name)
            return found
