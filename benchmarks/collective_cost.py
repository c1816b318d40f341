"""What timing the ranks' waits costs the training thread: per collective, per step, timed alone.

    python benchmarks/collective_cost.py [--calls 200000] [--repeats 5]

In one process, a fake process group of two ranks (torch's `fake` backend: every collective
returns at once, so what is timed is the call's Python and C++ path, not a network), with the
collectives probe attached as under `tm` (agent/probes/collectives.py), prints per call:

- a blocking `dist.all_reduce` of a one-element tensor, with the probe and through the original
  function, and the difference (the wrapper, the host clock read twice, the span check, the
  nested `Work.wait` passing through);
- an `async_op=True` all-reduce and its `wait()` (the launch is passed through, the wait timed);
- the probe's timing alone: a no-op function wrapped as a collective is, less the no-op (the
  difference of the two all_reduce rows is the same cost inside a 20 µs call's noise);
- the step listener (one tuple appended at each optimizer step);
- a backward while a DDP model syncs: the pre-hook on the loss's node, the two final callbacks
  and the timed wait (a tiny backward, with and without a DDP model syncing).

Medians over `--repeats`, with the range. The peer (trainmeter 0.0.7) times no collective, so
there is no ratio: the figure is ours alone, beside a collective's own cost for scale. A real
gloo all-reduce of one float between two processes costs about 50-200 µs on this machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def _median_range(samples: list[float]) -> str:
    return f"{statistics.median(samples):7.3f} us  (range {min(samples):.3f} .. {max(samples):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    n = args.calls

    import torch
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    from trainmeter.agent.probes import collectives, step_totals, steps

    steps.bind_torch(torch)  # the compiling check the probe reads, as attach() binds it
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    collectives.attach(torch)
    t = torch.ones(1)
    timed, plain = dist.all_reduce, dist.all_reduce.__trainmeter_original__
    timed(t)  # turns the probe on (two ranks)
    assert collectives.T.active
    collectives.T.marks = __import__("collections").deque(maxlen=16)  # a drained sender

    def loop(fn, *a, **k) -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            fn(*a, **k)
        return (time.perf_counter() - t0) / n * 1e6

    def async_round() -> None:
        timed(t, async_op=True).wait()

    def noop(*args: object, **kwargs: object) -> None:
        return None

    wrapped_noop = collectives._wrap_collective(noop, None)  # the probe's whole cost, alone

    class SyncingDDP:  # what the backward wrapper reads of a DDP model
        require_backward_grad_sync = True

    w = torch.ones(4, requires_grad=True)

    def backward_round() -> None:
        (w * 2.0).sum().backward()

    def backward_cost() -> float:
        """A tiny backward with a DDP model syncing (armed: pre-hook, two final callbacks, one
        timed wait) less the same backward with none (the wrapper passes it through)."""
        saved = collectives._ddps
        collectives._ddps = {SyncingDDP()}
        try:
            armed = loop(backward_round)
        finally:
            collectives._ddps = saved
        return armed - loop(backward_round)

    rows: dict[str, list[float]] = {k: [] for k in (
        "all_reduce, probe on", "all_reduce, original", "  added by the probe",
        "all_reduce(async_op=True) + wait()", "the timing alone (a no-op wrapped)",
        "step listener", "DDP's wait armed and timed, a backward")}
    last_t = step_totals.last_step_t
    for _rep in range(args.repeats):
        on, off = loop(timed, t), loop(plain, t)
        rows["all_reduce, probe on"].append(on)
        rows["all_reduce, original"].append(off)
        rows["  added by the probe"].append(on - off)
        rows["all_reduce(async_op=True) + wait()"].append(loop(async_round))
        rows["the timing alone (a no-op wrapped)"].append(loop(wrapped_noop) - loop(noop))
        rows["step listener"].append(loop(collectives._on_step, 7))
        rows["DDP's wait armed and timed, a backward"].append(backward_cost())
    assert step_totals.last_step_t is last_t
    print(f"{n} calls a repeat, {args.repeats} repeats, per call (fake 2-rank group):")
    for name, samples in rows.items():
        print(f"  {name:36} {_median_range(samples)}")
    print(f"  timed waits counted: {collectives.T.calls}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
