"""What the agent adds to a training step: a tiny CPU loop with and without it, and beside it
the published peer (trainmeter 0.0.7 in /tmp/peer) on the same loop, the same machine.

    .venv/bin/python benchmarks/agent_overhead.py [--steps 3000] [--rounds 3]

Each configuration runs the same script in a fresh process; the script times its own loop
(best of seven blocks, in µs per optimizer step) so start-up costs are left out; both wall time
and the process's CPU time (which includes the agent's sender thread, and is less disturbed by
other work on a small shared machine) are kept. Runs are interleaved over rounds and the median
is kept. Printed: µs per step for each configuration, the agent's added µs per step, and ours ÷
the peer's.
A benchmark, not a test: nothing here asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BOOTSTRAP = REPO / "src" / "trainmeter" / "agent" / "bootstrap"
PEER = Path(os.environ.get("TRAINMETER_PEER", "/tmp/peer"))

LOOP = r"""
import json, sys, time
import torch
from torch import nn
import torch.nn.functional as F
torch.manual_seed(0)
torch.set_num_threads(1)
model = nn.Sequential(nn.Embedding(64, 16), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 64))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
ids = torch.randint(0, 64, (4, 8))
def block(n):
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(n):
        loss = F.cross_entropy(model(ids).reshape(-1, 64), ids.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()
    return ((time.perf_counter() - t0) / n * 1e6, (time.process_time() - c0) / n * 1e6)
steps = int(sys.argv[1])
block(200)  # warm-up, and past the agent's counted step
blocks = [block(steps) for _ in range(7)]
wall, cpu = min(b[0] for b in blocks), min(b[1] for b in blocks)
print("BENCH " + json.dumps({"wall": wall, "cpu": cpu}), flush=True)
"""


#: Under our agent: the same loop, alternating blocks with the agent's hooks on and off in one
#: process, so the import order and memory layout (worth ±20 µs between processes here) cancel.
TOGGLE = (
    LOOP.split("steps = int")[0]
    + r"""
import statistics
from torch.optim import optimizer as optim_module
from trainmeter.agent.probes import steps
from trainmeter.agent.probes.step_state import state
n = int(sys.argv[1])
block(200)  # the root is found, the counted step is behind us
assert steps.root() is model
def hooks_on():
    state.root_hook.append(steps._CallPatch(type(model)))  # what adopting the root does
    state.step_hook.append(optim_module.register_optimizer_step_post_hook(steps._after_step))
steps.detach()
on, off = [], []
for i in range(16):  # on-off, then off-on: the order of a pair biases neither side
    for state in ("on", "off") if i % 2 == 0 else ("off", "on"):
        if state == "on":
            hooks_on()
            on.append(block(n)[1])
        else:
            off.append(block(n)[1])
        steps.detach()
diff = statistics.median(a - b for a, b in zip(on, off))
print("BENCH " + json.dumps({"on": statistics.median(on), "off": statistics.median(off),
                             "diff": diff}), flush=True)
"""
)


class Sink:
    """A datagram socket that reads and discards, standing in for `tm`'s ingest."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="tm-bench-")
        self.path = os.path.join(self.dir, "ingest")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.settimeout(0.2)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while not self.stop.is_set():
            try:
                self.sock.recv(1 << 20)
            except (TimeoutError, OSError):
                continue

    def close(self) -> None:
        self.stop.set()
        self.thread.join(2)
        self.sock.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINMETER_")}
    env.pop("PYTHONPATH", None)
    env.update(OMP_NUM_THREADS="1", **extra)
    return env


def _measure(argv: list[str], env: dict[str, str], cwd: str) -> dict[str, float] | None:
    proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=600)
    for line in proc.stdout.splitlines():
        if line.startswith("BENCH "):
            return {k: float(v) for k, v in json.loads(line[6:]).items()}
    print(f"  failed ({proc.returncode}): {proc.stderr.strip()[-400:]}", file=sys.stderr)
    return None


def hook_cost(n: int = 20000) -> None:
    """The agent's own mechanism per step, timed directly (steady, unlike a loop on a busy
    machine): a counted root call (its class's `__call__`) and the step hook."""
    import time

    import torch
    from torch import nn

    from trainmeter.agent.probes import root_finder, steps, tokens
    from trainmeter.agent.probes.step_state import state

    class Root(nn.Module):  # a forward that costs nothing: only the mechanism is left
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.zeros(1))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x

    tokens.bind(torch)
    state.nn_module = torch.nn.modules.module
    state.compiling = steps._compiling_check(torch)  # as attach() sets them
    state.tensor_cls = torch.Tensor
    model = Root()
    ids = torch.zeros(4, 8, dtype=torch.long)
    x = torch.zeros(2, 4)
    state.root, state.root_vars = model, root_finder.root_vars(model)
    state.first_done = True

    def call_root(m: nn.Module) -> float:
        with torch.no_grad():
            t0 = time.perf_counter()
            for _ in range(n):
                m(x)
            return (time.perf_counter() - t0) / n * 1e6

    bare = min(call_root(model) for _ in range(5))
    patch = steps._CallPatch(type(model))  # how the agent counts the root's calls
    counted = min(call_root(model) for _ in range(5))
    t0 = time.perf_counter()
    for _ in range(n):
        model(ids)
        steps._after_step(None, (), {})
    direct = (time.perf_counter() - t0) / n * 1e6 - bare
    patch.remove()
    state.root = None
    print(
        f"-- the agent's mechanism per step: {direct:.2f} µs for a counted root call and the step "
        f"hook beyond a bare call; a counted root call costs {counted - bare:.2f} µs more than a "
        f"bare one ({counted:.2f} vs {bare:.2f})"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="tm-bench-work-")
    script = os.path.join(work, "loop.py")
    Path(script).write_text(LOOP)
    steps = str(args.steps)
    peer_tm, peer_python = PEER / "bin" / "tm", PEER / "bin" / "python"
    configs: dict[str, tuple[list[str], dict[str, str]]] = {
        "plain": ([sys.executable, script, steps], _env()),
        "ours": ([sys.executable, script, steps], _env(PYTHONPATH=str(BOOTSTRAP))),
    }
    if peer_tm.exists() and peer_python.exists():
        configs["peer plain"] = ([str(peer_python), script, steps], _env())
        configs["peer"] = (
            [str(peer_tm), "--no-web", "-q", "--", str(peer_python), script, steps],
            _env(),
        )
    else:
        print(f"no peer at {PEER}: only our agent is measured", file=sys.stderr)
    results: dict[str, list[dict[str, float]]] = {name: [] for name in configs}
    sink = Sink()
    try:
        for _ in range(args.rounds):
            for name, (argv, env) in configs.items():
                if name == "ours":
                    env = {**env, "TRAINMETER_SOCKET": sink.path}
                value = _measure(argv, env, work)
                if value is not None:
                    results[name].append(value)
    finally:
        sink.close()
    for clock in ("cpu", "wall"):
        print(f"-- {clock} time, µs per optimizer step over {args.rounds} runs: median, best")
        med = {n: statistics.median(r[clock] for r in v) for n, v in results.items() if v}
        best = {n: min(r[clock] for r in v) for n, v in results.items() if v}
        for name in med:
            runs = ", ".join(f"{r[clock]:.1f}" for r in results[name])
            print(f"{name:>11}: {med[name]:8.2f} {best[name]:8.2f}  (runs: {runs})")
        for label, stat in (("median", med), ("best", best)):
            if "plain" not in stat or "ours" not in stat:
                continue
            ours = stat["ours"] - stat["plain"]
            line = f"  {label:>6}: ours adds {ours:7.2f}"
            if "peer" in stat and "peer plain" in stat:
                peer = stat["peer"] - stat["peer plain"]
                line += f", peer adds {peer:7.2f}"
                if peer > 0:
                    line += f", ratio ours/peer {ours / peer:.2f} (target: at most 0.33)"
            print(line)
    toggle = os.path.join(tempfile.mkdtemp(prefix="tm-bench-toggle-"), "toggle.py")
    Path(toggle).write_text(TOGGLE)
    sink = Sink()
    try:
        env = _env(PYTHONPATH=str(BOOTSTRAP), TRAINMETER_SOCKET=sink.path)
        paired = _measure([sys.executable, toggle, str(max(args.steps // 4, 100))], env, work)
    finally:
        sink.close()
        shutil.rmtree(os.path.dirname(toggle), ignore_errors=True)
    if paired is not None:
        print(
            f"-- ours in one process, hooks on vs off in alternating blocks (cpu, median): "
            f"{paired['on']:.2f} vs {paired['off']:.2f}, paired difference {paired['diff']:.2f}"
        )
    hook_cost()
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
