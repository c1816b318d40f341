"""The collectives probe in this process: which waits it times, once each, how they become
`comm` records at step marks, the device timing read back without waiting, and what it costs.

A fake process group of two ranks (torch's `fake` backend: every collective returns at once)
stands for a job; the probe's patches are taken off again after each test.
"""

from __future__ import annotations

import sys
import time

import pytest

torch = pytest.importorskip("torch")
dist = torch.distributed

from trainmeter.agent.probes import collectives, phases, step_totals, steps  # noqa: E402


class FakeSender:
    def __init__(self) -> None:
        self.records: list[tuple[str, dict, float | None]] = []
        self.drains: list = []

    def send(self, kind: str, d: dict, t: float | None = None) -> None:
        self.records.append((kind, d, t))

    def add_drain(self, drain) -> None:
        self.drains.append(drain)

    def learn_rank(self, rank: int) -> bool:
        self.rank = rank
        return True


class _Made:
    """Stands for a DDP model as its wrapped `__init__` ends (held weakly)."""


@pytest.fixture
def probe(monkeypatch):
    """The probe attached to a fake 2-rank group; everything it patched put back after."""
    from torch.distributed import distributed_c10d as c10d
    from torch.nn.parallel import distributed as ddp
    from torch.testing._internal.distributed.fake_pg import FakeStore

    c_module = torch._C._distributed_c10d
    handles = [c for c in vars(c_module).values()
               if isinstance(c, type) and issubclass(c, c_module.Work) and "wait" in vars(c)]
    saved = (
        {c: vars(c)["wait"] for c in handles},
        {n: getattr(dist, n) for n in collectives.COLLECTIVES if hasattr(dist, n)},
        {n: getattr(c10d, n) for n in collectives.COLLECTIVES if hasattr(c10d, n)},
        vars(ddp.DistributedDataParallel)["__init__"],
        torch.autograd.backward,
    )
    sender = FakeSender()
    monkeypatch.setattr(collectives, "get_sender", lambda: sender)
    monkeypatch.setattr(collectives, "T", collectives._Totals())
    monkeypatch.setattr(step_totals, "last_step_t", lambda: 42.0)
    monkeypatch.setattr(step_totals, "step_count", lambda: 0)
    listeners = list(steps.step_listeners)
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    try:
        collectives.attach(torch)
        # no DDP model made yet: the backward is torch's own until one is
        assert not hasattr(torch.autograd.backward, "__trainmeter_original__")
        collectives._wrap_ddp_init(lambda self: None)(_Made())  # a DDP model made
        assert torch.autograd.backward.__trainmeter_original__ is saved[4]
        collectives._ddps.clear()
        yield sender
    finally:
        dist.destroy_process_group()
        for cls, wait in saved[0].items():
            cls.wait = wait
        for name, fn in saved[1].items():
            setattr(dist, name, fn)
        for name, fn in saved[2].items():
            setattr(c10d, name, fn)
        ddp.DistributedDataParallel.__init__ = saved[3]
        torch.autograd.backward = saved[4]
        steps.step_listeners[:] = listeners


def test_each_blocking_collective_is_one_timed_wait(probe):
    T = collectives.T
    t = torch.ones(4)
    assert not T.active
    dist.all_reduce(t)  # the first wait turns the probe on: two ranks
    assert T.active and collectives._on_step in steps.step_listeners
    assert probe.drains == [collectives.drain]
    assert probe.rank == 0  # the group's rank, for a process its launcher gave no RANK
    dist.broadcast(t, 0)
    dist.barrier()
    out = torch.empty(8)
    with pytest.warns(FutureWarning):  # deprecated: left unpatched, its inner call is timed
        dist.all_gather_into_tensor(out, t)
    work = dist.all_reduce(t, async_op=True)  # only launches: not timed ...
    assert T.calls == 4
    work.wait()  # ... its wait is
    assert T.calls == 5 and T.depth == 0 and T.s >= 0.0


def test_waits_become_comm_records_at_step_marks(probe):
    T = collectives.T
    t = torch.ones(2)
    dist.all_reduce(t)
    dist.all_reduce(t)
    collectives._on_step(1)
    dist.all_reduce(t)
    collectives._on_step(2)
    dist.all_reduce(t)  # after the last mark: waits for the next step's record
    # stand for a long wait in step 3, to see it land in step 3 only (an hour: the real waits
    # before it, three all_reduce calls of one process, stay below it on any loaded box)
    T.s += 3600.0
    collectives.drain()
    (rec,) = probe.records
    kind, d, at = rec
    assert kind == "comm" and at == 42.0  # the time of the step it ends at
    assert (d["k"], d["n"], d["calls"], d["timed"]) == (2, 2, 3, "host")
    assert 0.0 <= d["s"] < 3600.0 and d["spans_s"] == 0.0
    collectives.drain()
    assert len(probe.records) == 1  # nothing new to say
    collectives._on_step(3)
    collectives.drain()
    _, d, _ = probe.records[-1]
    assert (d["k"], d["n"], d["calls"]) == (1, 3, 1) and d["s"] >= 3600.0


def test_a_wait_in_an_eval_span_is_counted_as_such(probe, monkeypatch):
    monkeypatch.setattr(phases, "_eval_since", 1.0)
    dist.barrier()
    monkeypatch.setattr(phases, "_eval_since", None)
    dist.barrier()
    T = collectives.T
    assert T.calls == 2 and 0.0 <= T.spans_s <= T.s


def test_one_process_group_leaves_the_probe_off(monkeypatch):
    from torch.testing._internal.distributed.fake_pg import FakeStore

    monkeypatch.setattr(collectives, "T", collectives._Totals())
    listeners = list(steps.step_listeners)
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=1)
    try:
        assert collectives._activate() is False
        assert collectives.T.off and collectives._on_step not in steps.step_listeners
    finally:
        dist.destroy_process_group()
        steps.step_listeners[:] = listeners


def test_the_backward_tail_is_timed_between_two_final_callbacks(probe):
    # what a backward arms while a DDP model syncs (`_watch`): a pre-hook on the loss's node
    # queues a callback when the backward reaches it; that one queues a second, which runs after
    # the callbacks queued in between (DDP's wait for its buckets: here one that sleeps 30 ms)
    T = collectives.T
    dist.all_reduce(torch.ones(1))  # on
    calls = T.calls
    w = torch.ones(3, requires_grad=True)
    loss = (w * 2).sum()
    collectives._watch(loss)

    def reducer_waits(grad):
        torch.autograd.Variable._execution_engine.queue_callback(lambda: time.sleep(0.03))

    w.register_hook(reducer_waits)
    before = T.s
    loss.backward()
    assert T.calls == calls + 1 and T.depth == 0 and not T.tail
    assert 0.03 <= T.s - before < 0.5
    assert w.grad.tolist() == [2.0, 2.0, 2.0]  # untouched
    # with a DDP model made and syncing, `loss.backward()` arms it by itself; not under no_sync
    class FakeDDP:  # stands for a DDP model: what the backward reads of it
        require_backward_grad_sync = True

    ddp_model = FakeDDP()
    armed = []
    real_watch, real_ddps = collectives._watch, collectives._ddps
    collectives._watch = lambda out: armed.append(out)
    try:
        collectives._ddps = {ddp_model}
        loss2 = (w * 3).sum()
        loss2.backward()
        ddp_model.require_backward_grad_sync = False
        loss3 = (w * 3).sum()
        loss3.backward()
    finally:
        collectives._watch, collectives._ddps = real_watch, real_ddps
    assert [a is loss2 for a in armed] == [True]


class _Event:
    """A CUDA event stand-in: completes when the test says, elapsed time in ms."""

    def __init__(self, enable_timing: bool = True) -> None:
        self.at: float | None = None
        self.done = False

    def record(self) -> None:
        self.at = len(_Event.clock)
        _Event.clock.append(self)

    def query(self) -> bool:
        return self.done

    def elapsed_time(self, end: _Event) -> float:
        return _Event.device_ms

    clock: list = []
    device_ms = 0.0


class _Cuda:
    Event = _Event

    @staticmethod
    def is_initialized() -> bool:
        return True

    @staticmethod
    def is_current_stream_capturing() -> bool:
        return False


def test_device_waits_are_read_back_when_done_and_never_waited_for(probe, monkeypatch):
    T = collectives.T
    dist.barrier()  # on, timed on the host (no CUDA yet)
    collectives._on_step(1)
    monkeypatch.setattr(step_totals, "step_count", lambda: 1)  # step 2 in progress
    T.cuda = _Cuda
    _Event.clock, _Event.device_ms = [], 250.0  # the device waited 0.25 s: longer than the host
    dist.barrier()
    assert len(T.pending) == 1 and T.device_used
    collectives._on_step(2)
    collectives.drain()
    # step 1 is sent; step 2 waits for its events, without asking the device to finish
    assert [d["n"] for _, d, _ in probe.records] == [1]
    for ev in _Event.clock:
        ev.done = True
    collectives.drain()
    _, d, _ = probe.records[-1]
    assert (d["n"], d["k"], d["calls"], d["timed"]) == (2, 1, 1, "device")
    assert d["s"] == pytest.approx(0.25)
    assert len(T.events) == 2  # the two events, kept for reuse
    # an event that never completes stalls nothing: 64 steps on, its host time is taken
    dist.barrier()
    monkeypatch.setattr(step_totals, "step_count", lambda: 2)
    for n in range(3, 3 + collectives.STALE_STEPS + 2):
        collectives._on_step(n)
    collectives.drain()
    _, d, _ = probe.records[-1]
    assert d["n"] == 2 + collectives.STALE_STEPS + 2 and d["calls"] == 1 and d["s"] < 0.25


def test_what_the_timing_costs_in_python_calls(probe):
    """The cost the probe adds, as a deterministic count of Python function calls: per blocking
    collective (the wrapper and its helpers) and per committed step (the listener)."""
    t = torch.ones(1)
    dist.all_reduce(t)  # on

    def count(fn) -> int:
        calls = 0

        def prof(frame, event, arg):
            nonlocal calls
            if event == "call":
                calls += 1

        sys.setprofile(prof)
        try:
            fn()
        finally:
            sys.setprofile(None)
        return calls

    timed = count(lambda: dist.all_reduce(t))
    plain = count(lambda: dist.all_reduce.__trainmeter_original__(t))
    # wrapper, _begin, _end, phases.in_span, the Work.wait wrapper (nested: not counted twice)
    assert timed - plain <= 5, (timed, plain)
    per_step = count(lambda: collectives._on_step(7)) - 1  # less the lambda
    assert per_step <= 2, per_step  # the listener and the step's time

    # a backward: with no DDP model, the wrapper alone; with one syncing, the arming, the
    # pre-hook, the two final callbacks and the timed wait
    class SyncingDDP:
        require_backward_grad_sync = True

    w = torch.ones(4, requires_grad=True)
    saved = collectives._ddps
    try:
        collectives._ddps = set()
        original = torch.autograd.backward.__trainmeter_original__
        bare = count(lambda: original((w * 2.0).sum()))  # torch's own, called directly
        plain = count(lambda: torch.autograd.backward((w * 2.0).sum()))  # through the wrapper
        collectives._ddps = {SyncingDDP()}
        armed = count(lambda: torch.autograd.backward((w * 2.0).sum()))
    finally:
        collectives._ddps = saved
    assert plain - bare <= 2, (plain, bare)  # no DDP model: the wrapper and dynamo's flag
    assert armed - plain <= 15, (armed, plain)


def test_a_collective_inside_a_compiled_function_is_left_to_dynamo(probe):
    # fullgraph: the wrappers add no graph break (they read a constant first, and return the
    # original call, which dynamo maps to its functional collective); nothing is timed there
    def step(x):
        y = x * 2
        dist.all_reduce(y)
        return y + 1

    dist.barrier()  # on
    calls = collectives.T.calls
    torch._dynamo.reset()
    out = torch.compile(step, fullgraph=True, backend="eager")(torch.ones(3))
    assert out.tolist() == [3.0, 3.0, 3.0] and collectives.T.calls == calls
    torch._dynamo.reset()


def test_a_rank_learned_late_is_on_every_record_after_it_and_in_the_ring(collector):
    # Lightning starts its first rank with no RANK in the environment: the process group knows
    # it, and the probe tells the sender at the first wait
    from trainmeter.agent import sender as sender_module
    from trainmeter.emit import emit

    sender = sender_module.get_sender()
    sender.rank = None
    emit(x=1.0)
    collector.records()  # shipped without a rank
    assert sender.learn_rank(2) and not sender.learn_rank(3) and sender.rank == 2
    emit(x=2.0)
    collector.records()
    emit(x=3.0)  # never shipped: read back from the ring after the process "died"
    collector.finish()
    ranks = {r["d"]["value"]: r["rank"] for r in collector.received if r["kind"] == "metric"}
    assert ranks == {1.0: None, 2.0: 2}
    assert [(r["d"]["value"], r["rank"]) for r in collector.recovered] == [(3.0, 2)]
