"""The engine, imported late and behind a guard: a live run and a replay load it the same way.

`tm` must run the training even when the engine is missing or broken (promise 9), and it must
start fast, so the engine is imported only once the child is running (or when a run is read
back), and each failure is one warning on stderr.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Warn = Callable[[str, str], None]


def load_engine_factory(warn: Warn) -> tuple[Callable[[], Any] | None, str | None]:
    """The `Engine` class, or None and the reason."""
    try:
        from trainmeter.engine import Engine
    except Exception as exc:  # noqa: BLE001 - a broken engine costs the summary, not the run
        reason = f"the engine could not be loaded ({exc!r})"
        warn("engine", f"{reason}; the run is logged but not summarized")
        return None, reason
    return Engine, None


def make_engine(factory: Callable[[], Any] | None, warn: Warn) -> tuple[Any, str | None]:
    if factory is None:
        return None, "the engine could not be loaded"
    try:
        return factory(), None
    except Exception as exc:  # noqa: BLE001 - a broken engine costs the summary, not the run
        reason = f"the engine could not be built ({exc!r})"
        warn("engine", f"{reason}; the run is logged but not summarized")
        return None, reason
