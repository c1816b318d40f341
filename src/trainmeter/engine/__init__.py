"""The engine: pure, records in and snapshot out. `Engine().feed(record)`, `.snapshot(now)`.

`Engine` is imported on first use: `tm` reads the FLOPs conventions (`engine/flops.py`) while
it parses its command line, before the child starts, and must not pay for the whole engine then.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .snapshot import Engine

__all__ = ["Engine"]


def __getattr__(name: str) -> object:
    if name == "Engine":
        from .snapshot import Engine

        return Engine
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
