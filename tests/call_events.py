"""The calls a piece of code makes on this thread, as `sys.setprofile` sees them: what the
agent's call budgets (tests/agent/test_emit_budget.py, test_sender_idle.py) count. A count of
calls is deterministic where a time is not."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any


def events(action: Callable[..., Any], **kwargs: Any) -> list[tuple[str, str]]:
    """(event, function name) of `action(**kwargs)` and every Python and C call it makes on
    this thread, in order; the profiler's own `setprofile` at the end left out."""
    seen: list[tuple[str, str]] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            seen.append((event, frame.f_code.co_name))
        elif event == "c_call":
            seen.append((event, getattr(arg, "__name__", repr(arg))))

    sys.setprofile(profile)
    try:
        action(**kwargs)
    finally:
        sys.setprofile(None)
    return seen[:-1] if seen and seen[-1] == ("c_call", "setprofile") else seen
