"""A `$TMPDIR` that fills up while the run goes on must not kill the run (issue 22, item 1).

The agent's ring is a sparse shared mapping in the socket directory, which lives in `$TMPDIR`.
Before, a page first touched after the filesystem filled was a SIGBUS: in the training process
(writing a value) and in `tm` (reading the ring after the child ended). The test mounts a small
tmpfs in a private mount namespace (`unshare`; as root or through a user namespace), points
`TMPDIR` at it, and runs a script that fills it (catching ENOSPC, as a plain Python loop would)
and then logs many more values than the ring's first reserved run of slots.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import read_events, run_dirs, tm_env

SCRIPT = """
import os, sys, tempfile
import torch
from trainmeter import emit
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(8, 4)
losses = []
filled = False
for step in range(STEPS):
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    emit(**{f"v{i}": float(step * 100 + i) for i in range(PER_STEP)})
    losses.append(loss.item())
    if step == 5 and not filled:  # fill the disk, as a checkpoint writer would
        filled = True
        try:
            with open(os.path.join(tempfile.gettempdir(), "filler"), "wb") as fh:
                while True:
                    fh.write(b"x" * 65536)
                    fh.flush()
        except OSError as exc:
            print("filled:", exc.strerror, file=sys.stderr)
with open(sys.argv[1], "w") as fh:
    fh.write(repr(losses))
print("steps", len(losses))
"""

STEPS = 300
PER_STEP = 20  # 6000 values: past the 4096 slots reserved with the ring


def _namespace_prefix(mountpoint: Path, size: str) -> list[str]:
    """A command prefix that runs the rest with a `size` tmpfs on `mountpoint`, or skip."""
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("no unshare(1) to mount a small tmpfs privately")
    mount = f'mount -t tmpfs -o size={size} tmpfs "$0" && exec "$@"'
    for flags in (["-m"], ["-r", "-m"]):
        probe = subprocess.run(
            [unshare, *flags, "sh", "-c", mount, str(mountpoint), "true"],
            capture_output=True,
            timeout=30,
        )
        if probe.returncode == 0:
            return [unshare, *flags, "sh", "-c", mount, str(mountpoint)]
    pytest.skip("cannot mount a tmpfs here (no root, no user namespaces)")


def test_a_full_tmpdir_kills_neither_the_run_nor_tm(tmp_path: Path) -> None:
    small = tmp_path / "small"
    small.mkdir()
    prefix = _namespace_prefix(small, "2m")
    script = tmp_path / "fill.py"
    script.write_text(SCRIPT.replace("STEPS", str(STEPS)).replace("PER_STEP", str(PER_STEP)))
    env = tm_env(TMPDIR=str(small), OMP_NUM_THREADS="1")

    alone = subprocess.run(
        [*prefix, sys.executable, str(script), str(tmp_path / "alone.txt")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    assert alone.returncode == 0, alone.stderr
    assert "filled:" in alone.stderr  # the disk did fill

    proc = subprocess.run(
        [*prefix, sys.executable, "-m", "trainmeter", "-q", "--name", "full",
         str(script), str(tmp_path / "under.txt")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    # promise 1: the losses are the ones the script has without tm
    assert (tmp_path / "under.txt").read_text() == (tmp_path / "alone.txt").read_text()
    assert "filled:" in proc.stderr

    events = read_events(run_dirs(tmp_path)[-1])
    kinds = [e["kind"] for e in events]
    assert kinds[-1] == "run.end", kinds[-5:]
    assert events[-1]["d"].get("exit_status") == 0
    steps = [e["d"] for e in events if e["kind"] == "step"]
    assert steps and max(d["n"] for d in steps) == STEPS
    values = [e for e in events if e["kind"] == "metric" and e["d"]["key"].startswith("v")]
    dropped = max(
        (e["d"]["value"] for e in events
         if e["kind"] == "fact" and e["d"].get("key") == "agent_dropped_records"),
        default=0,
    )
    # every value arrives, or is counted: none is silently lost to the full disk
    assert len(values) + dropped >= STEPS * PER_STEP, (len(values), dropped)
    assert len({(e["d"]["key"], e["d"].get("step")) for e in values}) == len(values)


WORKERS_SCRIPT = """
import multiprocessing as mp, os, sys, tempfile
import torch
from trainmeter import emit

def train(seed):
    torch.manual_seed(seed)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(8, 4)
    for step in range(200):
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        emit(loss=loss.item(), seed=float(seed))
    return seed

if __name__ == "__main__":
    torch.set_num_threads(1)
    try:  # the disk fills before the workers are forked: none can make its own ring
        with open(os.path.join(tempfile.gettempdir(), "filler"), "wb") as fh:
            while True:
                fh.write(b"x" * 65536)
                fh.flush()
    except OSError as exc:
        print("filled:", exc.strerror, file=sys.stderr)
    ctx = mp.get_context("fork")
    with ctx.Pool(2) as pool:  # stopped with SIGTERM when the block ends
        assert pool.map(train, [0, 1]) == [0, 1]
    alone = ctx.Process(target=train, args=(2,))  # ends with os._exit
    alone.start()
    alone.join()
    print("exit", alone.exitcode)
"""


def test_workers_forked_once_the_disk_is_full_lose_nothing_uncounted(tmp_path: Path) -> None:
    """Issue 27 item 4: with $TMPDIR full, fork workers lost 45-80 steps each with no count (no
    ring, and os._exit or the pool's SIGTERM skips the exit flush). Now spare rings tm reserved
    while there was room go to the first workers (the pool's, stopped by SIGTERM), and a worker
    without one (the third: the spares are gone and the disk full) flushes at os._exit."""
    small = tmp_path / "small"
    small.mkdir()
    prefix = _namespace_prefix(small, "48m")  # room for tm's spares when the run starts
    script = tmp_path / "workers.py"
    script.write_text(WORKERS_SCRIPT)
    env = tm_env(TMPDIR=str(small), OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [*prefix, sys.executable, "-m", "trainmeter", "-q", "--no-web", str(script)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "filled:" in proc.stderr and "exit 0" in proc.stdout
    events = read_events(run_dirs(tmp_path)[-1])
    workers = {}
    for e in events:
        if e["kind"] == "metric" and e["d"]["key"] == "seed":
            workers[e["pid"]] = int(e["d"]["value"])
    assert sorted(workers.values()) == [0, 1, 2]
    for pid in workers:
        steps = sum(e["d"]["k"] for e in events if e["kind"] == "step" and e["pid"] == pid)
        losses = [e for e in events if e["kind"] == "metric" and e["pid"] == pid
                  and e["d"]["key"] == "loss"]
        assert (steps, len(losses)) == (200, 200), (workers[pid], steps, len(losses))
    drops = [e["d"] for e in events if e["kind"] == "fact" and e["d"]["key"] == "agent_dropped_records"]
    assert drops == []
