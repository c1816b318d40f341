"""Which job a run belongs to and which node of it this `tm` watches, as known at start.

Each node of a multi-node job runs its own `tm` around its own launcher; their run directories
are joined afterwards (`tm summary DIR1 DIR2`) and their metrics by Prometheus, both by a shared
run id. `tm` takes it, most trusted first, from `--run-id`, the scheduler's job id
(`SLURM_JOB_ID`), torchrun's rendezvous id in the environment (`TORCHELASTIC_RUN_ID`,
`PET_RDZV_ID`) or on its command line (`--rdzv-id`). The node rank comes from the launcher's
command line (`--node-rank`) or the scheduler (`SLURM_NODEID`); the ranks themselves say which
node they landed on (`GROUP_RANK` in their hello), and that wins in the engine. No host name is
recorded here: the node is a number. See docs/ranks.md.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

_RUN_ID_ENV = ("SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "PET_RDZV_ID")
_FLAGS = {
    "--rdzv-id": "run_id",
    "--rdzv_id": "run_id",
    "--node-rank": "node_rank",
    "--node_rank": "node_rank",
    "--nnodes": "nodes",
}


def launcher_flags(command: Sequence[str]) -> dict[str, str]:
    """torchrun's own options (before the script): `--rdzv-id`, `--node-rank`, `--nnodes`."""
    out: dict[str, str] = {}
    words = list(command)
    i = 0
    while i < len(words):
        word = words[i]
        if word.endswith(".py") and not word.startswith("-"):
            break  # the script's own arguments follow: not the launcher's
        flag, eq, value = word.partition("=")
        if flag in _FLAGS:
            if not eq and i + 1 < len(words):
                i += 1
                value = words[i]
            out.setdefault(_FLAGS[flag], value)
        i += 1
    return out


def _count(text: str | None) -> int | None:
    try:
        value = int(str(text).strip())
    except (TypeError, ValueError):  # "1:4" (an elastic range) or garbage: unknown
        return None
    return value if value >= 0 else None


def identity(run_id: str | None, command: Sequence[str], env: Mapping[str, str]) -> dict[str, Any]:
    """{run_id, run_id_source, node_rank, nodes, node_source}; unknown fields are None."""
    flags = launcher_flags(command)
    job: dict[str, Any] = {"run_id": None, "run_id_source": None}
    candidates = [("--run-id", run_id)]
    candidates += [(name, env.get(name)) for name in _RUN_ID_ENV]
    candidates.append(("--rdzv-id", flags.get("run_id")))
    for source, value in candidates:
        value = (value or "").strip()
        if value and value != "none":  # torchrun's default rendezvous id names no job
            job.update(run_id=value[:200], run_id_source=source)
            break
    node_rank, nodes, source = _count(flags.get("node_rank")), _count(flags.get("nodes")), "argv"
    if node_rank is None and _count(env.get("SLURM_NODEID")) is not None:
        node_rank, nodes, source = (
            _count(env["SLURM_NODEID"]),
            _count(env.get("SLURM_NNODES")),
            "env",
        )
    job.update(
        node_rank=node_rank, nodes=nodes, node_source=source if node_rank is not None else None
    )
    return job


def clock_pair() -> dict[str, float]:
    """The wall clock and the monotonic clock read back to back, to line nodes up afterwards:
    a record's wall time is `unix + (t - monotonic)`."""
    mono = time.monotonic()
    unix = time.time()
    mono = (mono + time.monotonic()) / 2
    return {"unix": unix, "monotonic": mono}
