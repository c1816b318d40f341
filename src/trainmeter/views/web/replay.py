"""A finished run for the dashboard: its log replayed through the same engine as `tm summary`.

`runlog.replay.replay` feeds every record through the live run's recorder and engine, and
hands the points of the values the engine took and a snapshot every so often in record time (the live loop's pace, at most
2000 along the run) to its observers: here the bounded history, so the page draws the engine's
own numbers (tokens/s, MFU...) over the run as the live dashboard saw them. The final snapshot
is the replay's own, so the page shows the very numbers `tm summary --json` prints. This is the
path `benchmarks/run_all.py` measures.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..history import History


def replay_with_history(events: Path, history: History | None = None) -> tuple[Any, History]:
    """(the replay's result, the history of the whole run)."""
    from ...runlog.replay import replay

    history = history if history is not None else History()
    result = replay(events, observers=[history])
    history.on_snapshot(result.snapshot, None)
    return result, history
