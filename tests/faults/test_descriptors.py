"""Running short of file descriptors loses nothing without a count (issue 22, item 3).

Before, idle dashboard connections each held a thread and a descriptor with no limit and no
timeout; with 300 of them and a 256-descriptor limit, a training process SIGKILLed after step
150 was logged with 149 steps and 149 values, and nothing said so (the ring could not be
opened). Now the dashboard serves at most `MAX_CONNECTIONS` at once (closing the rest) and
times idle ones out, and `tm` holds descriptors in reserve for the end of the run.

Issue 29, item 6: 32 idle connections (or 40 sending their headers slowly) then locked the
owner out. Now 1,000 of them (idle and slow-header) are open while the owner reads the state
and the run loses nothing.
"""

from __future__ import annotations

import http.client
import json
import re
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path

from ..conftest import default_signals, read_events, run_dirs, tm_env

SCRIPT = """
import os, signal, sys, time
import torch
from trainmeter import emit
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(8, 4)
open("ready", "w").close()
while not os.path.exists("go"):
    time.sleep(0.02)
for step in range(1, 151):
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    emit(value=float(step))
os.kill(os.getpid(), signal.SIGKILL)  # nothing flushed: the last step and value are in the ring
"""

URL = re.compile(r"dashboard http://127\.0\.0\.1:(\d+)/")


def _limited() -> None:
    default_signals()
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))


def test_idle_dashboard_clients_cost_no_step_and_no_value(tmp_path: Path) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < 1400:  # the crowd's ends live in this process
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(1400, hard), hard))
    (tmp_path / "s.py").write_text(SCRIPT)
    tm = subprocess.Popen(
        [sys.executable, "-m", "trainmeter", "--port", "0", "--", sys.executable, "s.py"],
        cwd=tmp_path, env=tm_env(OMP_NUM_THREADS="1"), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, preexec_fn=_limited,
    )
    clients: list[socket.socket] = []
    try:
        port = None
        while port is None:
            line = tm.stderr.readline()
            assert line, "tm ended before its dashboard"
            match = URL.search(line)
            if match:
                port = int(match.group(1))
        deadline = time.monotonic() + 120
        while not (tmp_path / "ready").exists():
            assert time.monotonic() < deadline
            time.sleep(0.02)
        for i in range(1000):  # idle (connected, never a request) or sending headers slowly
            client = socket.create_connection(("127.0.0.1", port), timeout=10)
            if i % 2:
                try:
                    client.sendall(b"GET /api/state HTTP/1.1\r\nHo")
                except OSError:
                    pass  # already made to give way
            clients.append(client)
        time.sleep(0.5)
        owner = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        owner.request("GET", "/api/state", headers={"Host": f"127.0.0.1:{port}"})
        answer = owner.getresponse()
        assert answer.status == 200
        assert json.loads(answer.read())["mode"] == "live"
        owner.close()
        (tmp_path / "go").write_text("")
        _, err = tm.communicate(timeout=240)
    finally:
        for c in clients:
            c.close()
        if tm.poll() is None:
            tm.kill()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert tm.returncode == 137, err[-2000:]
    events = read_events(run_dirs(tmp_path)[-1])
    steps = [e["d"] for e in events if e["kind"] == "step"]
    assert sum(d["k"] for d in steps) == 150
    values = sorted(e["d"]["value"] for e in events if e["kind"] == "metric" and e["d"]["key"] == "value")
    assert values == [float(v) for v in range(1, 151)]
    assert events[-1]["kind"] == "run.end"
