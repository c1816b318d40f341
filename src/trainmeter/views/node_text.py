"""Which node of a multi-node job a run watched, in a few words for the terminal views."""

from __future__ import annotations

from typing import Any


def node_text(snap: dict[str, Any]) -> str | None:
    """'node 1 of 2 (ranks 2-3 of 4)' when this run is one node of a larger job, else None."""
    job = snap.get("job")
    if not isinstance(job, dict) or not isinstance(job.get("nodes"), int) or job["nodes"] < 2:
        return None
    ranks = job.get("ranks") or []
    held = (
        f"ranks {ranks[0]}-{ranks[-1]}" if len(ranks) > 1 else f"rank {ranks[0]}" if ranks else "?"
    )
    return f"node {job.get('node_rank')} of {job['nodes']} ({held} of {job.get('world_size')})"
