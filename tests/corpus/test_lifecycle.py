"""Jobs whose processes are replaced or forked (issue 27 item 4), in the corpus's style: each
program counts its own steps, tokens and logged values and prints them (`TRUTH`), and `tm` must
have recorded exactly that, with the losses bit-identical to a run without it.

- `exec_after_steps`: 30 steps and 30 values, then `os.execv` into a second program (same pid)
  that does 20 more. Before, the log kept only the second program's 20: the first program's
  ring was truncated by the second's agent and nothing was counted as lost.
- `fork_workers`: a parent that trains, then fork workers that train models of their own (a
  pool stopped by SIGTERM, a Process that ends with os._exit). Before, each worker lost its
  first two steps (the parent's optimizer iteration and root model carried across the fork)
  with no count.
- `dataloader_workers` (a shape the fix was not designed for): fork and spawn DataLoader workers
  load, never train; the memory of the rank is the training process's (spawned workers each
  sent their own memory as the rank's before).

Several processes print at once in `fork_workers`, so its LOSS lines are compared as sets.
"""

from __future__ import annotations

import pytest

from ..conftest import read_events, run_dirs
from . import background
from .test_corpus import _losses, _seen, _summary, _truth

pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # two processes (and their workers) per program

CASES = ("exec_after_steps", "fork_workers", "dataloader_workers")


@pytest.fixture(scope="module")
def jobs(request: pytest.FixtureRequest) -> dict[str, dict]:
    """The selected jobs (each under tm, then plain), queued as the session started with the
    corpus's runs (background.py); the three at once once the tests wait for them: one after
    the other they left a core idle."""
    runs = background.start(request.session)
    return {name: runs.queue.result(f"life:{name}", len(CASES)) for name in runs.lifecycle}


@pytest.fixture(params=CASES)
def job(request: pytest.FixtureRequest, jobs: dict[str, dict]) -> dict:
    return jobs[request.param]


def test_every_process_and_program_of_the_job_is_in_the_log(job: dict) -> None:
    for mode in ("tm", "plain"):
        assert job[mode]["rc"] == 0, f"{mode}: {job[mode]['stderr'][-3000:]}"
    truth = _truth(job["tm"]["stdout"])
    losses = _losses(job["tm"]["stdout"])
    assert len(losses) == truth["steps"]
    assert sorted(losses) == sorted(_losses(job["plain"]["stdout"]))  # promise 1, bit for bit
    seen = _seen(_summary(job))
    assert (seen["steps"], seen["tokens"]) == (truth["steps"], truth["tokens"])
    assert (seen["N"], seen["E"]) == (truth["N"], truth["E"])
    (run_dir,) = run_dirs(job["tm"]["cwd"])
    events = read_events(run_dir)
    assert sum(r["d"]["k"] for r in events if r["kind"] == "step") == truth["steps"]
    values = [r for r in events if r["kind"] == "metric" and r["d"]["key"] == "train_loss"]
    assert len(values) == truth["values"]
    # nothing was lost, so nothing may be counted as lost
    assert not [r for r in events if r["kind"] == "fact" and r["d"]["key"] == "agent_dropped_records"]
    # the rank's memory is read in the process that trains, never in a worker
    trainers = {r["pid"] for r in events if r["kind"] == "step"}
    assert {r["pid"] for r in events if r["kind"] == "memory"} <= trainers
    # the marker between two programs of one pid is never logged
    assert not [r for r in events if r["kind"] == "fact" and r["d"]["key"] == "agent_new_image"]


def test_each_value_comes_from_the_program_that_logged_it(job: dict) -> None:
    """The values of both programs of one pid carry their own numbers: after the exec the key
    table and the numbering start again, and tm must not read the new program's values with the
    old program's key names (it did once: the second program's values were logged under the
    first program's keys)."""
    (run_dir,) = run_dirs(job["tm"]["cwd"])
    events = read_events(run_dir)
    values = [r for r in events if r["kind"] == "metric"]
    assert {r["d"]["key"] for r in values} == {"train_loss"}
    got = sorted(repr(r["d"]["value"]) for r in values)
    want = sorted(line.split()[2] for line in _losses(job["tm"]["stdout"]))
    assert got == want  # each value logged is a loss the program printed, once
    if job["name"] == "exec_after_steps":
        # and live, by the socket: not read back from the ring at the end because tm refused
        # the datagrams (it refused every one of the second program's once; only this caught
        # it). A pool's worker SIGTERMed (fork_workers) has its last values read back, rightly.
        assert not [r for r in values if r["d"].get("recovered")]
        assert not [r for r in events if r["kind"] == "fact" and r["d"]["key"] == "ingest_dropped"]
