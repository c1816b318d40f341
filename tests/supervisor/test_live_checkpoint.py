"""A run opens at once whatever killed `tm` (issue 30 item 4): `tm` saves its engine beside the
log while the run goes, so after a SIGKILL the first look replays only the tail past the last
checkpoint, and gives the numbers a full replay gives."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trainmeter.runlog import checkpoint
from trainmeter.runlog import replay as replay_module
from trainmeter.runlog.replay import replay

from ..conftest import default_signals, run_dirs, tm_env
from .procs import write_script

pytestmark = pytest.mark.slow

# A child that reports steps and losses at a steady pace (as an agent would) until tm is gone.
STEADY = """
import json, os, socket, time
path = os.environ["TRAINMETER_SOCKET"]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
n = 0
while True:
    lines = []
    for _ in range(25):
        n += 1
        t = time.monotonic()
        lines.append(json.dumps({"v": 1, "t": t, "src": "agent", "rank": 0, "pid": os.getpid(),
            "kind": "step", "d": {"k": 1, "tokens": 1024, "n": n, "micro": 1}}))
        lines.append(json.dumps({"v": 1, "t": t, "src": "emit", "rank": 0, "pid": os.getpid(),
            "kind": "metric", "d": {"key": "train_loss", "value": 3.0 / n, "via": "emit", "step": n}}))
    try:
        s.sendto("\\n".join(lines).encode(), path)
    except OSError:
        break  # tm is gone
    time.sleep(0.01)
"""

# `tm` with its live checkpoints every 64 kB of log (not 16 MB), from the first byte on.
TM = """
import sys
from trainmeter.runlog import live_checkpoint as c
c.CHECKPOINT_FROM_B, c.CHECKPOINT_EVERY_B = 0, 64 << 10
from trainmeter.cli.main import entry
sys.argv = ["tm", *sys.argv[1:]]
entry()
"""


def test_a_sigkilled_tm_leaves_a_checkpoint_and_the_first_look_replays_the_tail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state"
    monkeypatch.setenv("TRAINMETER_STATE_DIR", str(state))  # the key the test reads with
    write_script(tmp_path / "train.py", STEADY)
    tm = subprocess.Popen(
        [sys.executable, "-c", TM, "-q", "--no-web", "--no-agent", "train.py"],
        cwd=tmp_path, env=tm_env(TRAINMETER_STATE_DIR=str(state)), preexec_fn=default_signals,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )
    try:
        deadline, found, events = time.monotonic() + 60, None, None
        while time.monotonic() < deadline and tm.poll() is None:
            dirs = run_dirs(tmp_path)
            events = dirs[0] / "events.jsonl" if dirs else None
            found = checkpoint.load(events) if events is not None else None
            # a checkpoint past 300 kB (950 to 1,200 steps at 245 to 320 bytes a step and its
            # loss: a checkpoint falls where a flush ends), and
            # the log on disk past it (tm flushes its log once a second)
            if found is not None and found[0] > 300_000 and events.stat().st_size > found[0]:
                break
            time.sleep(0.2)
        assert found is not None, tm.stderr.read() if tm.poll() is not None else "no checkpoint"
        os.kill(tm.pid, signal.SIGKILL)
        tm.wait(30)
    finally:
        if tm.poll() is None:
            os.killpg(tm.pid, signal.SIGKILL)
            tm.wait(30)
    assert events is not None and not (events.parent / "summary.json").exists()  # killed: no end
    offset, observers, _, _ = checkpoint.load(events)
    size = events.stat().st_size
    assert observers == [] and 300_000 < offset < size  # a live one, behind the log's end
    with open(events, "rb") as fh:
        head = fh.read(offset)
        tail_lines = fh.read().count(b"\n") + 1  # the tail's lines (a last one maybe cut short)
    fed: list[int] = []
    real = replay_module.typed_many

    def counting(decoder, raw):
        fed.append(len(raw))
        return real(decoder, raw)

    monkeypatch.setattr(replay_module, "typed_many", counting)
    resumed = replay(events)
    monkeypatch.undo()
    assert 0 < sum(fed) <= tail_lines  # only the tail was read
    full = replay(events, resume=False)
    assert resumed.snapshot == full.snapshot
    assert (resumed.records, resumed.lines, resumed.bad) == (full.records, full.lines, full.bad)
    # the tail's steps too, past a head of hundreds: a step and its loss take 245 to 320 bytes
    # of log (the monotonic clock's digits grow with the machine's uptime: 304 bytes at 8 h),
    # so the 300 kB head holds about 950 to 1,200 of them (it held exactly 1,000 once)
    assert full.snapshot["steps"] > head.count(b'"kind": "step"') >= 500
