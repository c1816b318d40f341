"""Run corpus programs without `tm`, one after the other, each in a child forked from this one
interpreter, which imported torch once: `python plain_batch.py JOBS.json`.

Each program's first line imports torch (two seconds of CPU, a quarter of a small program's
run): importing it once for all the plain runs of the corpus leaves each child where its own
`import torch` would have left it, and nothing of trainmeter's is on the path (the caller gives
the same environment a plain `python program.py` gets). Each child runs its program as
`__main__`, with its own directory first on sys.path, its argv, its cwd, its stdout and stderr
in files, and ends as the interpreter ends a script (exit handlers run, the exit status is the
script's). JOBS.json is a list of {"program", "cwd", "stdout", "stderr"}; for each the status
and the seconds it took are written to "<stdout>.status" as `STATUS SECONDS`.
"""

from __future__ import annotations

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


def main() -> None:
    for job in json.loads(open(sys.argv[1]).read()):
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:
            _child(job)
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        with open(job["stdout"] + ".status", "w") as fh:
            fh.write(f"{code} {time.monotonic() - started}")


if __name__ == "__main__":
    main()
