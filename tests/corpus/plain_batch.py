"""Run corpus programs without `tm`, one after the other, each in a child forked from this one
interpreter, which imported torch once: `python plain_batch.py JOBS.json`.

Each program's first line imports torch (two seconds of CPU, a quarter of a small program's
run): importing it once for all the plain runs of the corpus leaves each child where its own
`import torch` would have left it, and nothing of trainmeter's is on the path (the caller gives
the same environment a plain `python program.py` gets). Each child runs its program as
`__main__`, with its own directory first on sys.path, its argv, its cwd, its stdout and stderr
in files, and ends as the interpreter ends a script (exit handlers run, the exit status is the
script's). JOBS.json is a list of {"program", "cwd", "stdout", "stderr", "preload"}; for each
the status and the seconds it took are written to "<stdout>.status" as `STATUS SECONDS`.

A job's optional "preload" names modules the program imports itself anyway (torch._dynamo for a
program that builds an optimizer, transformers for one that imports it: a second or more of
CPU each): the jobs with the same preload run in children of one intermediate child that
imported them, so no job gets a module its own run would not have imported (a module only tm's
agent pulled in must never be in the reference run) and each import is paid once per group.
"""

from __future__ import annotations

import importlib
import json
import os
import runpy
import sys
import time

import torch  # noqa: F401 - the one import every program starts with, done once


def _child(job: dict) -> None:
    """In the forked child: become `python PROGRAM` in CWD; never returns."""
    os.chdir(job["cwd"])
    for fd, path in ((1, job["stdout"]), (2, job["stderr"])):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(target, fd)
        os.close(target)
    program = job["program"]
    sys.argv = [program]
    sys.path[0] = os.path.dirname(program)
    runpy.run_path(program, run_name="__main__")
    sys.exit(0)  # an uncaught exception or sys.exit inside ends the child as it ends a script


def _run_jobs(jobs: list[dict]) -> None:
    for job in jobs:
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:
            _child(job)
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        with open(job["stdout"] + ".status", "w") as fh:
            fh.write(f"{code} {time.monotonic() - started}")


def _groups(jobs: list[dict]) -> dict[tuple[str, ...], list[dict]]:
    """preload -> its jobs, in the order the jobs came."""
    out: dict[tuple[str, ...], list[dict]] = {}
    for job in jobs:
        out.setdefault(tuple(job.get("preload") or ()), []).append(job)
    return out


def main() -> None:
    for preload, jobs in _groups(json.loads(open(sys.argv[1]).read())).items():
        if not preload:
            _run_jobs(jobs)
            continue
        pid = os.fork()
        if pid == 0:  # the group's interpreter: torch and the group's modules, then its jobs
            for name in preload:
                importlib.import_module(name)
            _run_jobs(jobs)
            os._exit(0)
        os.waitpid(pid, 0)  # a job's failure is in its status file, read by the test


if __name__ == "__main__":
    main()
