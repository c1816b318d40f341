"""The agent's per-step mechanism alone, counted in instructions: the deterministic twin of
run_all.py's timed `hooks` row.

    .venv/bin/python benchmarks/mechanism_instructions.py [--pairs 4000] [--peer]

The root module (a trivial forward) is called through torch and the optimizer step post-hook
directly, `--pairs` times, in one process under callgrind (counting only that loop, main
thread), with the agent attached as run_all's `hooks` row attaches it and without it; printed:
instructions a call pair, the agent's loop minus the bare one, for three inputs:

- `same`: the same token tensor every call (run_all's row);
- `slice`: a new token tensor each call (`model(ids[i:i+4])`, a data loader's batch);
- `float`: the same float tensor every call (`model(x)`, the loop of the callgrind step row).

With `--peer` the peer's mechanism (trainmeter 0.0.7 in TRAINMETER_PEER_VENV) beside ours.
Deterministic to some tens of instructions on one machine (`PYTHONHASHSEED=0`), so a change of
a few hundred shows where the timed row drowns it. A benchmark, not a test: nothing here asserts.
"""

from __future__ import annotations

import argparse
import socket
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_all  # noqa: E402 - the shared callgrind driver and environment

LOOP = r"""
import os, sys, torch
from torch import nn
side, kind, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
class Root(nn.Module):
    def __init__(self):
        super().__init__(); self.w = nn.Parameter(torch.zeros(1))
    def forward(self, x):
        return x
model = Root()
opt = torch.optim.SGD(model.parameters(), lr=0.0)
dtype = torch.float32 if kind == "float" else torch.long
x = torch.zeros(4, 8, dtype=dtype)
batches = [torch.zeros(n + 104, 8, dtype=dtype)[i:i + 4] for i in range(n + 100)] if kind == "slice" else None
def after(optimizer, args, kwargs):
    return None
if side == "ours":
    from trainmeter.agent.probes import root_finder, steps
    from trainmeter.agent.probes.step_state import state
    steps.attach(torch)
    root_finder.adopt(model)  # what discovery does at the first training forward
    root_finder.remove(state.root_hook[1:])  # the first call's one-off hook
    state.root_hook[1:] = []
    after = steps._after_step
elif side == "peer":
    from trainmeter.agent import core, sender
    agent = core.Agent(sender.Sender(os.environ["TRAINMETER_SOCK"]))
    agent.torch = torch
    agent._root = model
    model.register_forward_pre_hook(agent._on_root_forward, with_kwargs=True)
    agent._forward_tracking = True
    agent._step_index = 10
    agent._count_state = "done"
    after = agent._on_optimizer_step
def run(first, count):
    if batches is None:
        for _ in range(count):
            model(x); after(opt, (), {})
    else:
        for i in range(first, first + count):
            model(batches[i]); after(opt, (), {})
run(0, 100)  # past the first steps (the first iteration watched, the dtype seen)
print("READY", flush=True)
sys.stdin.readline()
run(100, n)
print("END", flush=True)
sys.stdin.readline()
"""

KINDS = ("same", "slice", "float")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=4000)
    parser.add_argument("--peer", action="store_true", help="the peer's mechanism beside ours")
    args = parser.parse_args()
    if not run_all.have_callgrind():
        sys.exit("valgrind (callgrind) is not installed")
    sides = ["ours"] + (["peer"] if args.peer and run_all.have_peer() else [])
    with tempfile.TemporaryDirectory(prefix="tm-bench-mech-") as tmp:
        cwd = Path(tmp)
        (cwd / "loop.py").write_text(LOOP)
        sink = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sink.bind(str(cwd / "sink"))
        env = run_all.clean_env(
            PYTHONHASHSEED="0", TRAINMETER_SOCKET=str(cwd / "sink"), TRAINMETER_SOCK=str(cwd / "sink")
        )
        print("| input | " + " | ".join(sides) + " |")
        print("| --- |" + " --- |" * len(sides))
        for kind in KINDS:
            cells = []
            for side in sides:
                py = str(run_all.PEER_PY) if side == "peer" else run_all.OUR_PY
                counts = [
                    run_all.callgrind_instructions(
                        [py, "loop.py", who, kind, str(args.pairs)], env, cwd, cwd / f"cg.{who}"
                    )
                    for who in ("bare", side)
                ]
                if None in counts:
                    cells.append("failed")
                    continue
                cells.append(f"{(counts[1][1] - counts[0][1]) / args.pairs:,.0f}")
            print(f"| {kind} | " + " | ".join(cells) + " |", flush=True)
        sink.close()


if __name__ == "__main__":
    main()
