"""Values reach `tm` over the socket while the run lives, not only from the ring after it.

The step probe makes the process's ring at the first optimizer step; a value emitted after that
must still be shipped by the sender thread (a live dashboard shows the loss as it comes), and
only what a death kept back is recovered from the ring at the end.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_dirs, run_tm

LOOP = """
import time, torch
from trainmeter import emit
m = torch.nn.Linear(4, 4)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
for i in range(30):
    loss = m(torch.randn(2, 4)).sum()
    loss.backward()
    opt.step()
    opt.zero_grad()
    emit(train_loss=float(i))
    time.sleep(0.01)
"""


def test_values_after_the_first_step_arrive_live(tmp_path: Path) -> None:
    (tmp_path / "loop.py").write_text(LOOP)
    result = run_tm(["-q", "--no-web", "loop.py"], tmp_path)
    assert result.returncode == 0, result.stderr
    [run] = run_dirs(tmp_path)
    values = [
        r
        for r in map(json.loads, (run / "events.jsonl").read_text().splitlines())
        if r["kind"] == "metric" and r["d"]["key"] == "train_loss"
    ]
    assert [r["d"]["value"] for r in values] == [float(i) for i in range(30)]
    assert not [r for r in values if r["d"].get("recovered")]  # none waited for the ring
