"""The snapshot's `straggler` and `comm` in words: the phrase on the end-of-run line, a line a
rank for `tm summary` and the passport, the straggler and the earlier episodes in a sentence.
Pure: snapshot in, text out (engine/stragglers.py says how the numbers are made)."""

from __future__ import annotations

from typing import Any

from ..snapread import finite, get_dict
from .format import ms, percent


def subject(named: dict[str, Any]) -> str:
    """'rank 3', or 'node 1 (ranks 2, 3)'."""
    if named.get("kind") == "node":
        ranks = ", ".join(str(r) for r in named.get("ranks") or [])
        return f"node {named.get('node')} (ranks {ranks})"
    return f"rank {named.get('rank')}"


def _others(named: dict[str, Any]) -> str:
    n = named.get("others")
    return "the other rank waits" if n == 1 else f"the other {n} ranks wait"


def sentence(named: dict[str, Any]) -> str:
    """'rank 3 computes 60.0 ms longer a step than the others since step 5; the other 7 ranks
    wait for it: 18.0% of the job's time'."""
    extra, share = finite(named.get("extra_s")), finite(named.get("extra_share"))
    cost = f": {percent(share)} of the job's time" if share is not None else ""
    since = named.get("since_step")
    until = "" if named.get("active", True) else f" to step {named.get('until_step')}"
    return (
        f"{subject(named)} computes {ms(extra)} longer a step than the others "
        f"{'from' if until else 'since'} step {since}{until}; {_others(named)} for it{cost}"
    )


def end_phrase(snap: dict[str, Any]) -> str | None:
    """For the end-of-run line: the straggler named at the end, shortly."""
    named = get_dict(snap, "straggler")
    if not named:
        return None
    share = finite(named.get("extra_share"))
    cost = f", {percent(share)} of the time" if share is not None else ""
    return f"{subject(named)} computes {ms(finite(named.get('extra_s')))} longer a step{cost}"


def rank_rows(snap: dict[str, Any]) -> list[tuple[str, str, str, str, str]]:
    """(rank, step, compute a step, wait a step, wait share) for each rank that reported its
    waits (over the blocks of `comm.window`)."""
    rows = get_dict(get_dict(snap, "comm") or {}, "ranks") or {}
    out = []
    for rank, row in rows.items():
        if not isinstance(row, dict):
            continue
        share = finite(row.get("wait_share"))
        out.append((str(rank), ms(finite(row.get("step_s"))), ms(finite(row.get("compute_s"))),
                    ms(finite(row.get("wait_s"))), percent(share) if share is not None else "?"))
    return out


def episode_lines(snap: dict[str, Any]) -> list[str]:
    """The straggler now, then any earlier episode that ended, one sentence each."""
    comm = get_dict(snap, "comm") or {}
    out = []
    named = get_dict(snap, "straggler")
    if named:
        out.append(sentence(named))
    for episode in comm.get("episodes") or []:
        if isinstance(episode, dict) and not episode.get("active"):
            out.append(sentence(episode))
    return out


def verdict(snap: dict[str, Any]) -> str | None:
    """The straggler in a sentence, or why none is named (the rule, or why it cannot say)."""
    lines = episode_lines(snap)
    if lines:
        return lines[0]
    comm = get_dict(snap, "comm")
    reason = (snap.get("absent") or {}).get("straggler")
    if reason:
        return f"no straggler named: {reason}"
    if comm:
        return "no rank is slower than the others by the rule: " + str(comm.get("rule"))
    return None
