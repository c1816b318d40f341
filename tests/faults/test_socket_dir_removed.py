"""A /tmp cleaner that removes the socket, or its whole directory, mid-run loses nothing
(issue 22, item 4). Before, deleting the socket lost 493 of 1024 values (the agent went quiet
for good), and deleting the directory lost 456 of 933 steps (the rings went with it).

Now `tm` maps each ring as it appears (a removed file stays readable through the mapping) and
binds its socket again when the path is gone; the agent keeps what waits, in its ring, until
the path is back.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ..conftest import read_events, run_dirs, run_tm

SCRIPT = """
import os, shutil, sys, time
import torch
from trainmeter import emit
how = sys.argv[1]
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(8, 4)
for step in range(STEPS):
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    for i in range(PER_STEP):
        emit(value=float(step * PER_STEP + i))
    if step == STEPS // 3:
        path = os.environ["TRAINMETER_SOCKET"]
        if how == "socket":
            os.unlink(path)
        else:
            shutil.rmtree(os.path.dirname(path))
    time.sleep(0.002)
print("DONE")
"""
STEPS = 300
PER_STEP = 4


@pytest.mark.parametrize("how", ["socket", "directory"])
def test_removing_the_socket_or_its_directory_loses_nothing(tmp_path: Path, how: str) -> None:
    script = tmp_path / "s.py"
    script.write_text(SCRIPT.replace("PER_STEP", str(PER_STEP)).replace("STEPS", str(STEPS)))
    out = run_tm(["-q", "--no-web", "--", sys.executable, str(script), how], tmp_path,
                 env=None)
    assert out.returncode == 0 and "DONE" in out.stdout, out.stderr[-2000:]
    events = read_events(run_dirs(tmp_path)[-1])
    steps = [e["d"] for e in events if e["kind"] == "step"]
    assert sum(d["k"] for d in steps) == STEPS
    assert max(d["n"] for d in steps) == STEPS
    values = sorted(e["d"]["value"] for e in events if e["kind"] == "metric" and e["d"]["key"] == "value")
    assert values == [float(v) for v in range(STEPS * PER_STEP)]  # each once
