"""The engine: pure, records in and snapshot out. `Engine().feed(record)`, `.snapshot(now)`."""

from __future__ import annotations

from .snapshot import Engine

__all__ = ["Engine"]
