"""The same `emit` calls through two versions of the agent give the same records: a check for a
change of `emit`'s steady path (issue 30), not a test (it runs for a minute).

    .venv/bin/python benchmarks/emit_equality.py --old REV [--calls 20000] [--wrap 1100000]

REV's `src` (`git archive`) and this checkout's each run one child process under a socket
collector (`tests/socket_collector.py`: what `tm`'s ingest does, the rings read after the
child ended). The child makes the same seeded calls: 0 to 4 keys a call from a pool that grows
(a key never seen before now and then), plain floats and what the checked path reads or refuses
(ints, booleans, inf, nan, an int too large for a float, strings, None, 0-d CPU tensors, one
that requires grad), the step moved between calls; a stretch with the ring full (the receiver
as if a whole ring behind: refused and counted); then `--wrap` single floats, flushed every
100,000 (the ring never full), so numbering runs past a whole ring and slots are reused.
Compared: every value record by its number `q`, all but its time and whether the socket or the
ring delivered it (key, value, step, `q`, `via`), which of them share a time (one time per
call); the facts (such as the drop count, sent by the sender
thread when it sees them: in any order) and the warnings on stderr. Prints "identical" or the first difference.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.socket_collector import SocketCollector  # noqa: E402 - the repo's own collector

CHILD = r"""
import random, sys
import torch
from trainmeter import emit
from trainmeter.agent import ring, sender as sender_module
from trainmeter.agent.probes.step_state import state

calls, wrap = int(sys.argv[1]), int(sys.argv[2])
rng = random.Random(30)
grad = torch.tensor(0.75, requires_grad=True)
VALUES = [0.5, -2.25, 1e-300, 3.0, 0.0, 7, -1, True, False, float("inf"), float("-inf"),
          float("nan"), 10**400, "0.1", None, torch.tensor(0.25), grad, torch.tensor(1.0) * 2]
pool = ["k0"]
state.n_steps = 0
for i in range(calls):
    if rng.random() < 0.05 and len(pool) < 300:
        pool.append(f"k{len(pool)}")
    if rng.random() < 0.3:
        state.n_steps += rng.randint(1, 3)
    keys = rng.sample(pool, min(len(pool), rng.choice([0, 1, 1, 1, 1, 2, 3, 4])))
    emit(**{k: rng.choice(VALUES) if rng.random() < 0.2 else rng.random() for k in keys})
    if i == calls // 2:  # the receiver a whole ring behind for a while: values refused, counted
        the_ring = ring.current()
        the_ring.tail -= ring.CAPACITY
        for j in range(50):
            emit(full=float(j), **({"k0": 1.5} if j % 3 else {}))
        the_ring.tail += ring.CAPACITY
sender = sender_module.get_sender()
for i in range(wrap):
    emit(train_loss=i * 0.5)
    if i % 100000 == 99999:
        sender.flush()
"""


def _source(rev: str, into: Path) -> Path:
    data = subprocess.run(["git", "archive", rev, "src"], cwd=REPO, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def _run(src: Path, calls: int, wrap: int, tmp: Path) -> tuple[list[Any], list[str]]:
    script = tmp / "child.py"
    script.write_text(CHILD)
    col = SocketCollector()
    try:
        env = col.env(agent=False, extra_pythonpath=str(src), PYTHONHASHSEED="0")
        col.start()
        proc = subprocess.run([sys.executable, str(script), str(calls), str(wrap)], env=env,
                              capture_output=True, text=True, timeout=1800)
        got = col.finish()
    finally:
        col.close()
    if proc.returncode != 0:
        sys.exit(f"the child under {src} failed:\n{proc.stderr[-2000:]}")
    out, facts, last_t, group = [], [], None, -1
    # Values by their number: which of them the socket delivered before the child's exit and
    # which `tm` took from the ring after it ("recovered", logged last) is the machine's timing
    metrics = sorted((r for r in got if r["kind"] == "metric"), key=lambda r: r["q"])
    for record in got:
        if record["kind"] == "fact":  # sent by the sender thread when it sees them: in any order
            facts.append(json.dumps({k: v for k, v in record.items() if k not in ("t", "pid")}))
    for record in metrics:
        if record["t"] != last_t:
            group += 1
        last_t = record["t"]
        data = {k: v for k, v in record.items() if k not in ("t", "pid")}
        data["d"] = {k: v for k, v in data["d"].items() if k != "recovered"}
        out.append([group, json.dumps(data, sort_keys=True)])
    warnings = [line for line in proc.stderr.splitlines() if "trainmeter" in line]
    return out, sorted(facts) + warnings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="the revision to compare with (its src)")
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--wrap", type=int, default=1_100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tm-emit-eq-") as tmp_name:
        tmp = Path(tmp_name)
        old_src = _source(args.old, tmp / "old")
        old = _run(old_src, args.calls, args.wrap, tmp)
        new = _run(REPO / "src", args.calls, args.wrap, tmp)
    print(f"old: {len(old[0])} values, {len(old[1])} facts and warnings; "
          f"new: {len(new[0])} values, {len(new[1])} facts and warnings")
    if old == new:
        print("identical")
        return
    for i, (a, b) in enumerate(zip(old[0], new[0], strict=False)):
        if a != b:
            sys.exit(f"record {i} differs:\n  old {a}\n  new {b}")
    sys.exit(f"different lengths, facts or warnings: {len(old[0])} / {len(new[0])} values; "
             f"{old[1][:5]} / {new[1][:5]}")


if __name__ == "__main__":
    main()
