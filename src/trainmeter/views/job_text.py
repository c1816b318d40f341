"""`tm summary DIR1 DIR2 ...`: several nodes' runs shown as the one job they were.

The merged snapshot (runlog/replay_many.py) is shown like any run's summary, under a head
that names the job, its nodes and ranks, and a line per node, so a node that lagged or ended
early is seen at once.
"""

from __future__ import annotations

from typing import Any

from ..snapread import get
from .format import duration, ms, percent, si
from .terminal_summary import summary_text


def job_text(snap: dict[str, Any]) -> str:
    job = snap.get("job") or {}
    gpus = get(snap, "n_gpus.value")
    head = (
        f"job {job.get('run_id') or '(no run id)'}: {job.get('nodes')} nodes"
        f" of {job.get('nodes_expected')}, {job.get('world_size')} ranks"
        + (f", {gpus} GPUs" if gpus else "")
    )
    lines = [head]
    ranks = snap.get("ranks")
    if isinstance(ranks, dict):
        slow = ranks.get("slowest")
        step_s = (ranks.get("step_time_s") or {}).get(slow)
        lines.append(
            f"slowest rank {slow} ({ms(step_s)}/step, "
            f"{percent(ranks.get('spread', 0.0))} slower than rank {ranks.get('fastest')})"
        )
    from .straggler_text import verdict

    slow_one = verdict(snap)  # the rank or node the others wait for, across nodes
    if slow_one and snap.get("comm"):
        lines.append(slow_one)
    offsets = {
        n.get("node_rank"): n.get("start_offset_s")
        for n in get(snap, "time.nodes") or []
    }
    for node in job.get("node_list") or []:
        mfu = node.get("mfu")
        offset = offsets.get(node.get("node_rank"))
        parts = [
            f"  node {node.get('node_rank')}: ranks {','.join(str(r) for r in node.get('ranks') or [])}",
            f"{si(node.get('steps'))} steps",
            f"{si(node.get('tokens_seen'))} tokens",
        ]
        if isinstance(node.get("tokens_per_s"), (int, float)):
            parts.append(f"{si(node['tokens_per_s'])} tok/s")
        if isinstance(mfu, (int, float)):
            parts.append(f"MFU {percent(mfu)}")
        if isinstance(offset, (int, float)):
            parts.append(f"started +{duration(offset)}")
        if not node.get("finished"):
            parts.append("no run.end")
        lines.append(", ".join(parts) + f"  ({node.get('run_dir')})")
    skew = get(snap, "time.first_step_skew_s")
    if isinstance(skew, (int, float)):
        lines.append(f"first steps {duration(skew)} apart by the nodes' wall clocks")
    lines.append(summary_text({k: v for k, v in snap.items() if k != "job"}))  # job: above
    return "\n".join(lines)
