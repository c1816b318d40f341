"""A training loop with no optimizer (weights updated by hand, as pytorch/examples' regression
and word-language-model scripts do) of about 2 s, plain and under `tm`, and beside it the
published peer (trainmeter 0.0.7 in /tmp/peer) on the same script.

    .venv/bin/python benchmarks/hand_sgd.py [--seconds 2] [--pairs 5] [--before SRC]

`--before SRC` adds an older checkout's `tm` (its `src` directory) as one more side, to show a
change's effect in one run.

The goal (issue 27): under `tm` within 0.5 s of its plain time. Before, the counted step after
step 2 cost such a loop 1.4-2 s (entering the counting mode imported torch._dynamo) and counted
nothing. Each run is a fresh process; the whole process's wall time is measured (start-up and
exit included: what a person waits for), and the script times its own loop (first step to last).
The step count is calibrated once so that the plain loop takes `--seconds`. Runs are interleaved
(plain, ours, peer, plain, ...), medians kept, with the range. A benchmark: nothing asserts.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _peer import clean_env, ours, peer  # noqa: E402

SCRIPT = r"""
import sys, time
import torch
torch.manual_seed(0)
torch.set_num_threads(1)
steps = int(sys.argv[1])
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 1))
w = torch.randn(256, 1)
t0 = time.perf_counter()
for step in range(steps):
    x = torch.randn(64, 256)
    y = x @ w
    model.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-1e-3)
print("LOOP_S", time.perf_counter() - t0, "LOSS", float(loss.detach()))
"""


def _run(argv: list[str], cwd: Path, src: str | None = None) -> tuple[float, float]:
    env = clean_env()
    if src is not None:
        env["PYTHONPATH"] = src
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{argv[0]} failed:\n{proc.stderr[-2000:]}")
    loop = next(float(line.split()[1]) for line in proc.stdout.splitlines() if "LOOP_S" in line)
    return wall, loop


def _cell(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s [{min(values):.2f}..{max(values):.2f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--before", help="an older checkout's src directory, run as one more side")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        script = cwd / "hand_sgd_loop.py"
        script.write_text(SCRIPT)
        _, probe = _run([sys.executable, str(script), "200"], cwd)
        steps = max(50, int(200 * args.seconds / probe))
        sides = {"plain": [sys.executable], "ours": [*ours(), "-q", "--no-web"]}
        if args.before:
            sides["before"] = [*ours(), "-q", "--no-web"]
        peer_tm = peer()
        if peer_tm is not None:
            sides["peer"] = [*peer_tm, "-q", "--no-web"]
        walls: dict[str, list[float]] = {k: [] for k in sides}
        loops: dict[str, list[float]] = {k: [] for k in sides}
        for _ in range(args.pairs):
            for name, prefix in sides.items():
                src = args.before if name == "before" else None
                wall, loop = _run([*prefix, str(script), str(steps)], cwd, src)
                walls[name].append(wall)
                loops[name].append(loop)
    print(f"hand-SGD loop, {steps} steps (plain loop about {args.seconds:g} s), "
          f"{args.pairs} interleaved runs each, medians [range]")
    print(f"{'':6} {'process wall':>26} {'the loop itself':>26} {'over plain (wall)':>18}")
    base = statistics.median(walls["plain"])
    for name in sides:
        extra = statistics.median(walls[name]) - base
        print(f"{name:6} {_cell(walls[name]):>26} {_cell(loops[name]):>26} {extra:>+17.2f}s")
    if peer_tm is None:
        print("peer: not installed (see benchmarks/_peer.py)")


if __name__ == "__main__":
    main()
