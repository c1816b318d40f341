"""`tm summary RUN1 RUN2 ...`: the nodes of one multi-node job, replayed and shown as one run."""

from __future__ import annotations

import json
import sys


def main_job(specs: list[str], as_json: bool) -> int:
    from ..runlog.replay_many import replay_job
    from ..runlog.runs import RunNotFound, resolve_run

    try:
        run_dirs = [resolve_run(spec) for spec in specs]
    except RunNotFound as exc:
        print(f"tm summary: {exc}", file=sys.stderr)
        return 1
    if len(set(run_dirs)) < len(run_dirs):
        print("tm summary: the same run is named twice", file=sys.stderr)
        return 2
    try:
        snap = replay_job(run_dirs)
    except OSError as exc:
        print(f"tm summary: cannot read a run log ({exc})", file=sys.stderr)
        return 1
    if as_json:
        print(json.dumps(snap, allow_nan=False, indent=2), flush=True)
        return 0
    from ..views.job_text import job_text

    print(job_text(snap), flush=True)
    return 0
