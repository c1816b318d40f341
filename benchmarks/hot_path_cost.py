"""What the agent costs the training thread per call, timed alone over a million calls.

    python benchmarks/hot_path_cost.py [--calls 1000000] [--repeats 5]

A loop's few microseconds of agent cost drown in this machine's noise when timed as part of a
training step; timed alone, over many calls, they do not. This runs inside one process with the
agent set up as under `tm` (a bound socket, the ring beside it) and prints, per call:

- `emit(train_loss=x)`: the sender thread parked, so the figure is the call alone, beside a
  plain `dict.update(train_loss=x)` timed in the same rounds (the yardstick: "a dict update");
- the step hook (`optimizer.step()`'s post-hook body: totals swapped, ring header written);
- a loop calling an empty function, whose cost is subtracted from both.

Medians over `--repeats`, with the range. Standard library and torch only.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def _median_range(samples: list[float]) -> str:
    return f"{statistics.median(samples):7.3f} us  (range {min(samples):.3f} .. {max(samples):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    n = args.calls

    directory = tempfile.mkdtemp(prefix="tm-bench-")
    path = os.path.join(directory, "s")
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    receiver.bind(path)
    os.environ["TRAINMETER_SOCKET"] = path

    from trainmeter.agent import outbox, ring
    from trainmeter.agent import sender as sender_module
    from trainmeter.emit import emit

    sender = sender_module.get_sender()
    assert sender is not None
    sender.interval = 3600.0  # parked: the training thread's cost alone
    sender._start()
    outbox.put("warm", 0.0, "emit", None)  # makes the ring

    def drain() -> None:
        """Empty the ring between repeats, so each repeat writes into free slots."""
        r = ring.active
        while True:
            lines, last = outbox.drain_lines(1 << 16)
            if not last:
                break
            r.tail = last + 1
            try:
                while True:
                    receiver.recv(1 << 20, socket.MSG_DONTWAIT)
            except BlockingIOError:
                pass

    def empty(**values: float) -> None:
        return None

    rows: list[tuple[str, list[float]]] = []
    base, cost, upd = [], [], []
    box: dict[str, float] = {}
    for _rep in range(args.repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            empty(train_loss=1.5)
        base.append((time.perf_counter() - t0) / n * 1e6)
        t0 = time.perf_counter()
        for _ in range(n):
            emit(train_loss=1.5)
        cost.append((time.perf_counter() - t0) / n * 1e6 - base[-1])
        t0 = time.perf_counter()
        for _ in range(n):
            box.update(train_loss=1.5)
        upd.append((time.perf_counter() - t0) / n * 1e6 - base[-1])
        drain()
    rows.append(("emit(train_loss=x), one key", cost))
    rows.append(("  for scale: dict.update(train_loss=x)", upd))

    import torch  # noqa: F401 - the step probe binds to torch's optimizer module

    from trainmeter.agent.probes import step_totals, steps
    from trainmeter.agent.probes.step_state import state

    state.root = None  # every call commits a step (no root: nothing to compare with)
    state.compiling = steps._compiling_check(torch)  # as attach() sets it
    hook = steps._after_step
    ring_now = ring.current()
    assert ring_now is not None
    step_totals.bind_ring(ring_now)
    opt = object()
    hcost = []
    for _rep in range(args.repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            hook(opt, (), {})
        hcost.append((time.perf_counter() - t0) / n * 1e6 - base[-1])
    rows.append(("step hook (totals + ring header)", hcost))
    pack, mm, at = step_totals._pack_totals, ring_now.mm, step_totals._TOTALS_AT
    wcost = []
    for _rep in range(args.repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            pass
        bare = time.perf_counter() - t0
        t0 = time.perf_counter()
        for _ in range(n):
            pack(mm, at, 1, 2, 3, 4, 1.5, 6)
        wcost.append((time.perf_counter() - t0 - bare) / n * 1e6)  # a C call: no Python frame
    rows.append(("  of which the ring write (pack_into)", wcost))

    print(f"{n} calls a repeat, {args.repeats} repeats, per call:")
    for name, samples in rows:
        print(f"  {name:36} {_median_range(samples)}")
    print(f"  {'(loop + call overhead, subtracted)':36} {_median_range(base)}")
    sender.go_quiet()
    receiver.close()


if __name__ == "__main__":
    main()
