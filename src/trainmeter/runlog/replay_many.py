"""Several nodes' run directories replayed as one job: `tm summary DIR1 DIR2 ...`.

Each node's `tm` logged its own ranks on its own monotonic clock. Each log is replayed through
its own engine (so every node's numbers are exactly what its `tm` showed), then `merge` joins
the node snapshots: tokens, tokens/s, GPUs, FLOPs and energy add up; steps, step time, progress
and the loss curves are the job clock's (global rank 0, on node 0); the ranks' step times are
pooled, so the slowest rank is the slowest across nodes; MFU is the GPU-weighted mean, which is
the job's tokens/s x FLOPs per token / (all GPUs x peak) when the nodes share a peak.

Nodes are lined up on the wall clock: each `run.start` holds the wall time and the monotonic
time read together (`clock`), so a record's wall time is `unix + (t - monotonic)`. That is as
good as the nodes' wall clocks agree; the first step is a check, since data-parallel ranks take
it together: `first_step_skew_s` is how far apart the nodes' first steps are by their clocks
(docs/ranks.md says how far apart is too far).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..payloads import RUN_START
from ..plain import Plain
from ..snapread import finite as _num
from . import job_keys
from .replay import ReplayResult, replay

#: Nodes whose first steps are further apart than this (wall clock) get a warning.
SKEW_WARN_S = 2.0


class NodeRun(Plain):
    """One node's run of a job, replayed. A plain class, as the dataclass it replaces was:
    `dataclasses` imports `inspect` (~8 ms of a replay's start; see `plain.py`)."""

    def __init__(
        self,
        run_dir: Path,
        result: ReplayResult,
        start: dict[str, Any] | None = None,  # the run.start record
        first_step_t: float | None = None,  # the node's clock rank's first step (its monotonic t)
    ) -> None:
        self.run_dir = run_dir
        self.result = result
        self.start: dict[str, Any] = {} if start is None else start
        self.first_step_t = first_step_t



def _start(events: Path) -> dict[str, Any]:
    """The log's run.start record (its first line), or {}."""
    try:
        with open(events, "rb") as fh:
            rec = json.loads(fh.readline(1 << 20) or b"null")
    except (OSError, ValueError, RecursionError):
        return {}
    return rec if isinstance(rec, dict) and rec.get("kind") == RUN_START.name else {}


def replay_nodes(run_dirs: list[Path]) -> list[NodeRun]:
    """Replay each node's log (in the order given). Raises OSError when one cannot be read."""
    nodes = []
    for run_dir in run_dirs:
        result = replay(run_dir / "events.jsonl")
        start = _start(run_dir / "events.jsonl")
        nodes.append(NodeRun(run_dir, result, start, result.first_step_t))
    return nodes


def _wall(start: dict[str, Any], t: float | None) -> float | None:
    """A monotonic `t` of this node as wall time, by its run.start's clock pair."""
    d = start.get("d") if isinstance(start.get("d"), dict) else {}
    clock = d.get("clock") if isinstance(d.get("clock"), dict) else None
    if t is None:
        return None
    if clock and isinstance(clock.get("unix"), (int, float)):
        return clock["unix"] + (t - clock["monotonic"])
    unix, t0 = d.get("unix_time"), start.get("t")  # older logs: read a moment apart
    if isinstance(unix, (int, float)) and isinstance(t0, (int, float)):
        return unix + (t - t0)
    return None


def _sum(snaps: list[dict[str, Any]], get: Any) -> float | None:
    values = [_num(get(s)) for s in snaps]
    return sum(v for v in values if v is not None) if all(v is not None for v in values) else None


def merge(nodes: list[NodeRun]) -> dict[str, Any]:
    """One snapshot for the job from its nodes' snapshots (see the module docstring)."""
    snaps = [n.result.snapshot for n in nodes]
    jobs = [s.get("job") or {} for s in snaps]
    order = sorted(range(len(nodes)), key=lambda i: (not jobs[i].get("job_clock"), i))
    lead = snaps[order[0]]  # the job clock's node: steps, step time, progress, curves
    warnings: list[str] = []
    absent: dict[str, str] = {}
    out: dict[str, Any] = {
        "steps": lead.get("steps"),
        "tokens_seen": _sum(snaps, lambda s: s.get("tokens_seen")),
    }
    if not any(j.get("job_clock") for j in jobs):
        warnings.append("no node holds global rank 0 (the job's clock): steps are node 1's")
    for key in (
        "step_index",
        "step_time_s",
        "progress",
        "eta_s",
        "series",
        "budget_tokens",
        "peak",
    ):
        if key in lead:
            out[key] = lead[key]
    tps = _sum(snaps, lambda s: s.get("tokens_per_s"))
    if tps is not None:
        out["tokens_per_s"] = tps
    else:
        absent["tokens_per_s"] = "not every node measured tokens/s: " + ", ".join(
            f"node {j.get('node_rank')}: {s.get('absent', {}).get('tokens_per_s', '?')}"
            for s, j in zip(snaps, jobs, strict=True)
            if _num(s.get("tokens_per_s")) is None
        )
    flops = _sum(snaps, lambda s: s.get("flops_spent"))
    if flops is not None:
        out["flops_spent"] = flops
    n_gpus = _sum(snaps, lambda s: (s.get("n_gpus") or {}).get("value"))
    if n_gpus:
        out["n_gpus"] = {"value": int(n_gpus), "source": "sum over nodes"}
    _merge_mfu(out, snaps, absent)
    _merge_ranks(out, snaps)
    _merge_waits(out, nodes, jobs, absent)
    joules = _sum(snaps, lambda s: (s.get("energy") or {}).get("joules"))
    if joules is not None:
        energy: dict[str, Any] = {"joules": joules, "source": "sum over nodes"}
        if out["tokens_seen"]:
            energy["joules_per_token"] = joules / out["tokens_seen"]
        out["energy"] = energy
    out["time"] = _merge_time(nodes, snaps, jobs, warnings)
    out["job"] = _job(nodes, jobs, warnings)
    out["alerts"] = [
        {**a, "node": j.get("node_rank")}
        for s, j in zip(snaps, jobs, strict=True)
        for a in s.get("alerts") or []
    ]
    for s, j in zip(snaps, jobs, strict=True):
        warnings.extend(f"node {j.get('node_rank')}: {w}" for w in s.get("warnings") or [])
    for key, reason in (lead.get("absent") or {}).items():
        if key not in out:
            absent.setdefault(key, reason)
    job_keys.complete(out, snaps, jobs, lead, absent)
    out["warnings"] = warnings
    out["absent"] = absent
    return out


def _merge_mfu(out: dict[str, Any], snaps: list[dict[str, Any]], absent: dict[str, str]) -> None:
    """GPU-weighted mean of the nodes' MFU: sum(mfu_i x gpus_i) / sum(gpus_i)."""
    entries = [s.get("mfu") for s in snaps]
    if not all(isinstance(e, dict) and _num(e.get("value")) is not None for e in entries):
        reasons = [s.get("absent", {}).get("mfu") for s in snaps if s.get("absent", {}).get("mfu")]
        absent["mfu"] = "not every node has MFU" + (f": {reasons[0]}" if reasons else "")
        return
    conventions = {e["convention"] for e in entries}  # type: ignore[index]
    if len(conventions) > 1:
        absent["mfu"] = (
            f"the nodes' MFU is under different conventions ({', '.join(sorted(conventions))})"
        )
        return
    weights = [_num(e.get("n_gpus")) or 1.0 for e in entries]  # type: ignore[union-attr]
    total = sum(weights)
    mfu = dict(entries[0])  # type: ignore[arg-type]
    mfu["value"] = sum(e["value"] * w for e, w in zip(entries, weights, strict=True)) / total  # type: ignore[index]
    mfu["n_gpus"] = int(total)
    by = [e.get("by_convention") or {} for e in entries]  # type: ignore[union-attr]
    if all(by):
        mfu["by_convention"] = {
            k: sum(b[k] * w for b, w in zip(by, weights, strict=True)) / total
            for k in by[0]
            if all(k in b for b in by)
        }
    out["mfu"] = mfu


def _merge_ranks(out: dict[str, Any], snaps: list[dict[str, Any]]) -> None:
    """Every rank's step time, across nodes; slowest, fastest and spread over all of them."""
    times: dict[str, float] = {}
    for s in snaps:
        ranks = s.get("ranks") or {}
        times.update({r: v for r, v in (ranks.get("step_time_s") or {}).items() if _num(v)})
        if not ranks and _num(s.get("step_time_s")):  # a node with one rank
            times[str((s.get("job") or {}).get("clock_rank", 0))] = s["step_time_s"]
    if len(times) < 2:
        return
    slowest = max(times, key=lambda r: (times[r], -int(r)))
    fastest = min(times, key=lambda r: (times[r], int(r)))
    out["ranks"] = {
        "step_time_s": dict(sorted(times.items(), key=lambda kv: int(kv[0]))),
        "slowest": slowest,
        "fastest": fastest,
        "spread": times[slowest] / times[fastest] - 1.0,
    }


def _merge_waits(
    out: dict[str, Any], nodes: list[NodeRun], jobs: list[dict[str, Any]], absent: dict[str, str]
) -> None:
    """Every rank's compute and wait, compared across nodes over the same steps, so the rank
    (or the node) the others wait for is named for the whole job (engine/stragglers.py)."""
    from ..engine.stragglers import Stragglers

    parts = [n.result.stragglers for n in nodes if n.result.stragglers is not None]
    node_of = {
        int(r): int(j["node_rank"])
        for j in jobs
        if isinstance(j.get("node_rank"), int)
        for r in j.get("ranks") or []
        if isinstance(r, int)
    }
    world = max((j.get("world_size") or 1 for j in jobs), default=1)
    comm, straggler, reasons = Stragglers.merged(parts, node_of).snapshot(
        all(n.result.finished for n in nodes), world, 0
    )
    if comm is not None:
        out["comm"] = comm
    if straggler is not None:
        out["straggler"] = straggler
    for key, reason in reasons.items():
        absent.setdefault(key, reason)


def _merge_time(
    nodes: list[NodeRun],
    snaps: list[dict[str, Any]],
    jobs: list[dict[str, Any]],
    warnings: list[str],
) -> dict[str, Any]:
    """The job's wall span (first node's start to the last node's end) and the nodes' lineup."""
    starts, ends, firsts = [], [], []
    for n, s in zip(nodes, snaps, strict=True):
        t0 = n.start.get("t") if isinstance(n.start.get("t"), (int, float)) else None
        w0 = _wall(n.start, t0)
        elapsed = _num((s.get("time") or {}).get("elapsed_s"))
        starts.append(w0)
        ends.append(w0 + elapsed if w0 is not None and elapsed is not None else None)
        firsts.append(_wall(n.start, n.first_step_t))
    out: dict[str, Any] = {"finished": all(n.result.finished for n in nodes)}
    if all(w is not None for w in starts + ends):
        out["elapsed_s"] = max(ends) - min(starts)  # type: ignore[type-var,operator]
        out["start_unix"] = min(starts)  # type: ignore[type-var]
    known = [w for w in firsts if w is not None]
    if len(known) >= 2:
        skew = max(known) - min(known)
        out["first_step_skew_s"] = skew
        if skew > SKEW_WARN_S:
            warnings.append(
                f"the nodes' first steps are {skew:.1f}s apart by their wall clocks: the clocks "
                "disagree (no NTP?) or these runs are not one job; times are lined up as logged"
            )
    out["nodes"] = [
        {
            "node_rank": j.get("node_rank"),
            "start_offset_s": None if w is None or None in starts else w - min(starts),  # type: ignore[type-var]
            "elapsed_s": (s.get("time") or {}).get("elapsed_s"),
            "goodput": (s.get("time") or {}).get("goodput"),
        }
        for w, s, j in zip(starts, snaps, jobs, strict=True)
    ]
    return out


def _job(nodes: list[NodeRun], jobs: list[dict[str, Any]], warnings: list[str]) -> dict[str, Any]:
    run_ids = sorted({str(j.get("run_id")) for j in jobs if j.get("run_id")})
    if len(run_ids) > 1:
        warnings.append(f"the run directories carry different run ids ({', '.join(run_ids)})")
    elif not run_ids:
        warnings.append("no run id in these logs: they are joined because you named them together")
    ranks = sorted({r for j in jobs for r in j.get("ranks") or []})
    world = max((j.get("world_size") or 1 for j in jobs), default=1)
    expected = max((j.get("nodes") or 1 for j in jobs), default=1)
    node_ranks = [j.get("node_rank") for j in jobs]
    if len(set(node_ranks)) < len(node_ranks):
        warnings.append(f"two directories claim the same node rank ({node_ranks})")
    if len(nodes) < expected or len(ranks) < world:
        warnings.append(
            f"{len(nodes)} of {expected} nodes and {len(ranks)} of {world} ranks given: "
            "the sums cover only these"
        )
    return {
        "run_id": run_ids[0] if len(run_ids) == 1 else None,
        "nodes": len(nodes),
        "nodes_expected": expected,
        "world_size": world,
        "ranks": ranks,
        "node_list": [
            {
                "node_rank": j.get("node_rank"),
                "run_dir": str(n.run_dir),
                "ranks": j.get("ranks"),
                "steps": n.result.snapshot.get("steps"),
                "tokens_seen": n.result.snapshot.get("tokens_seen"),
                "tokens_per_s": n.result.snapshot.get("tokens_per_s"),
                "mfu": (n.result.snapshot.get("mfu") or {}).get("value"),
                "n_gpus": (n.result.snapshot.get("n_gpus") or {}).get("value"),
                "finished": n.result.finished,
            }
            for n, j in zip(nodes, jobs, strict=True)
        ],
    }


def replay_job(run_dirs: list[Path]) -> dict[str, Any]:
    """The job's merged snapshot from several nodes' run directories."""
    return merge(replay_nodes(run_dirs))
