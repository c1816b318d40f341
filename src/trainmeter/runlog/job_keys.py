"""Every snapshot key in the job's snapshot (`tm summary DIR1 DIR2 --json`), or in its `absent`.

The job's merge sums what adds up across nodes (tokens, tokens/s, GPUs, energy) and takes the
job clock's node for the clock's numbers. What describes the model (its facts, FLOPs per token
under each convention, the run's command) is the same on every node, so the job clock's node
gives it. The rest is one node's own (its GPUs' counters, its waterfall, its advice, its
explanations): it is listed in `absent` with the reason and the command that shows it, never
silently left out.
"""

from __future__ import annotations

from typing import Any

from ..engine.keys import STRUCTURAL, TOP_LEVEL_KEYS

#: The same on every node: taken from the job clock's node.
FROM_LEAD = frozenset(
    {"facts", "run", "agent", "flops_per_token", "conventions", "convention_formulas", "models",
     "tokens_counted", "budget", "flops_required"}
)


def complete(
    out: dict[str, Any],
    snaps: list[dict[str, Any]],
    jobs: list[dict[str, Any]],
    lead: dict[str, Any],
    absent: dict[str, str],
) -> None:
    """Fill `out` from the lead node, or `absent` with why, for every documented key."""
    for key in sorted(TOP_LEVEL_KEYS - STRUCTURAL):
        if key in out or key in absent:
            continue
        if key in FROM_LEAD and key in lead:
            out[key] = lead[key]
            continue
        having = [str(j.get("node_rank")) for s, j in zip(snaps, jobs, strict=True) if key in s]
        if having:
            absent[key] = (
                f"one node's own, not joined across nodes (nodes {', '.join(having)} have it): "
                "tm summary with one node's run directory shows it"
            )
            continue
        reasons = {
            str((s.get("absent") or {}).get(key))
            for s in snaps
            if (s.get("absent") or {}).get(key)
        }
        absent[key] = (
            "no node has it: " + "; ".join(sorted(reasons))
            if reasons
            else "no node has it (nothing in any node's log gives it)"
        )
