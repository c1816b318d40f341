"""How long this rank waits for the others in collectives, step by step.

In a synchronous job (DDP, FSDP, a hand-written all-reduce of the gradients) every rank's step
takes as long as the slowest rank's: the others wait for it inside a collective. What tells the
slow rank apart is not its step time but how little it waits. This probe times those waits, at
the three places a rank blocks for the others, without touching the user's code or a number:

- the `torch.distributed` collectives (`all_reduce`, `reduce_scatter_tensor`,
  `all_gather_into_tensor`, `broadcast`, `barrier`, `send`/`recv`, the object collectives, and
  the `_single` ones FSDP2 calls), patched in `torch.distributed` and in `distributed_c10d`
  (whose own functions call each other): a blocking call is timed whole, launch included;
- `Work.wait()` (the C++ handle's method, patched on its class and on the handle kinds that
  have their own): an `async_op=True` handle blocks there when the loop (or FSDP2) waits;
- DDP's reducer, which waits in C++ at the end of the backward pass until every bucket's
  all-reduce is done. Once a `DistributedDataParallel` is made (its `__init__` is wrapped), each
  `torch.autograd.backward` (what `loss.backward()` calls) while one of them syncs its
  gradients (not under `no_sync()`) puts a pre-hook on the loss's autograd node; when the
  backward reaches it, it queues a final callback, which runs once the rank's own backward is
  computed and queues a second one, run after the reducer's wait (callbacks run in the order
  queued, and the reducer queues its wait when its last bucket is ready). The time between them
  is the rank's exposed wait for the others' gradients. `torch.autograd.backward` is wrapped at
  the first DDP model made, not before: a process without one pays nothing on its backward.
  This holds for a DDP model under `torch.compile` too, whose forward (DDP's own included) is
  compiled. Nothing is returned from the hooks: gradients are untouched;
- `torch.distributed._broadcast_coalesced` (DDP's parameter broadcast at start, its buffer
  broadcast in each forward: BatchNorm), which blocks in C++.

On a CPU (gloo) the host blocks for the wait and the host time is the wait. With CUDA up, a wait
only makes the compute stream wait for the communication stream: two timing events are recorded
on the current stream around it (never a synchronize; `event.query()` reads them later, from the
sender thread) and the wait is the device time between them, or the host time when longer.

A wait inside an eval or checkpoint span is counted (`spans_s`) but the time split keeps it in
that span. A wait inside another timed wait is not counted again.

Nothing costs a single-process run anything: the probe turns itself on at the first wait in a
process group of two ranks or more; from then, each committed step appends one tuple (the step
listener) and the sender thread turns them into `comm` records {k, n, s, spans_s, calls, timed}
at the time of the last step they cover, so the engine lines waits and steps up exactly.
"""

from __future__ import annotations

import collections
import functools
import time

from ...payloads import COMM
from ..sender import get_sender
from . import compile_support, guard, phases, step_totals, steps

TYPE_CHECKING = False  # typing costs milliseconds in every Python the run starts
if TYPE_CHECKING:
    from typing import Any

PROBE = "collectives"
#: Step marks kept for the sender (a sender stalled this long loses only resolution, not time:
#: the marks are cumulative, so the next record covers more steps).
MAX_MARKS = 4096
#: Device-timed waits not yet read back; past this, a wait is timed on the host alone.
MAX_PENDING = 4096
#: A device-timed wait whose events have not completed this many steps after its own is taken
#: at its host time (an event that will never complete must not stall the records).
STALE_STEPS = 64
_perf = time.perf_counter


class _Totals:
    """The running totals, written by the training thread (and the backward's thread), read
    whole by the sender thread at each step mark."""

    __slots__ = (
        "s", "spans_s", "calls", "depth", "tail", "active", "off", "device_used",
        "marks", "pending", "dev", "sent", "cuda", "compiling", "engine", "events",
        "tensor_cls", "autograd",
    )

    def __init__(self) -> None:
        self.s = 0.0  # host-timed wait seconds so far
        self.spans_s = 0.0  # of which inside eval/checkpoint spans
        self.calls = 0
        self.depth = 0  # timed waits open (a nested one is not counted twice)
        self.tail = False  # between DDP's two callbacks
        self.active = False  # a wait in a group of 2+ ranks was seen: the listener runs
        self.off = False  # a single-process group: never look again
        self.device_used = False
        self.marks: collections.deque[tuple[int, float, float, float, int]] = collections.deque(
            maxlen=MAX_MARKS
        )
        # device-timed waits: [step, start event, end event, host seconds, in a span]
        self.pending: collections.deque[list[Any]] = collections.deque()
        self.dev: dict[int, list[float]] = {}  # step -> [s, spans_s, calls] read back
        self.sent = (0, 0.0, 0.0, 0)  # (n, s, spans_s, calls) of the last record
        self.cuda: Any = None  # torch.cuda, once bound
        self.compiling: Any = bool
        self.engine: Any = None  # the autograd engine (queue_callback)
        self.events: list[Any] = []  # free timing events, reused
        self.tensor_cls: Any = None  # torch.Tensor, once bound
        self.autograd: Any = None  # torch.autograd, once bound (its backward wrapped with DDP)


T = _Totals()


# ---- timing one wait ------------------------------------------------------------------------


def _begin() -> tuple[float, Any]:
    """Start timing a wait: (host time, the start event or None)."""
    T.depth += 1
    ev = None
    cuda = T.cuda
    if cuda is not None and cuda.is_initialized() and len(T.pending) < MAX_PENDING:
        try:
            if not cuda.is_current_stream_capturing():
                ev = T.events.pop() if T.events else cuda.Event(enable_timing=True)
                ev.record()
        except Exception:  # noqa: BLE001 - promise 1: time it on the host
            ev = None
    return _perf(), ev


def _end(t0: float, ev: Any) -> None:
    """Stop timing a wait begun by `_begin` and add it to the totals."""
    dt = _perf() - t0
    T.depth -= 1
    if T.depth or T.tail:
        if ev is not None:
            T.events.append(ev)  # not recorded twice: back to the pool
        return  # inside another timed wait: already counted there
    span = phases.in_span()
    if ev is not None:
        try:
            end = T.events.pop() if T.events else T.cuda.Event(enable_timing=True)
            end.record()
            T.pending.append([step_totals.step_count() + 1, ev, end, dt, span])
            T.device_used = True
            return
        except Exception:  # noqa: BLE001 - promise 1: count the host time
            pass
    T.s += dt
    if span:
        T.spans_s += dt
    T.calls += 1


def _activate() -> bool:
    """The first wait: count from now on if this process is one of two ranks or more. Never
    raises (it runs inside the loop's collective)."""
    if T.off:
        return False
    try:
        import torch.distributed as dist

        ranks = dist.get_world_size() if dist.is_initialized() else 1
        if ranks < 2:
            T.off = True
            return False
        T.active = True
        steps.step_listeners.append(_on_step)
        sender = get_sender()
        if sender is not None:
            # a launcher that set no RANK in this process (Lightning's first rank): the group
            # knows it
            sender.learn_rank(dist.get_rank())
            sender.add_drain(drain)
        guard.attached(PROBE)
        from .. import boot

        boot.say_hello()  # tm learns the probe is on (the time split gains its part)
        return True
    except Exception as exc:  # noqa: BLE001 - promise 1: the probe is off, the run goes on
        _fail(exc)
        return False


def _on_step(n: int) -> None:
    """Step listener (training thread): the totals as they stood at this step's commit."""
    if T.depth:  # a wait left open (a backward that raised before DDP's callback): closed
        T.depth = 0
        T.tail = False
    T.marks.append((n, step_totals.last_step_t(), T.s, T.spans_s, T.calls))


_on_step.probe = PROBE  # type: ignore[attr-defined]


# ---- the wrappers ---------------------------------------------------------------------------


def _wrap_wait(original: Any) -> Any:
    compiling = T.compiling  # a closure cell: dynamo reads it as a constant, with no guard

    @functools.wraps(original)
    def wait(self: Any, *args: Any, **kwargs: Any) -> Any:
        # dynamo may trace this (a compiled function calling a collective): a constant first
        if compiling() or T.off or (not T.active and not _activate()):
            return original(self, *args, **kwargs)
        t0, ev = _begin()
        try:
            return original(self, *args, **kwargs)
        finally:
            try:
                _end(t0, ev)
            except Exception as exc:  # noqa: BLE001 - promise 1
                _fail(exc)

    wait.__trainmeter_original__ = original  # type: ignore[attr-defined]
    return wait


def _wrap_collective(original: Any, async_at: int | None) -> Any:
    """A `torch.distributed` collective: a blocking call (`async_op` false, or a collective
    without it) is timed whole, launch included, and the `Work.wait()` inside it is not counted
    again; an `async_op=True` call only launches, and its handle's `wait()` is what is timed."""
    compiling = T.compiling

    @functools.wraps(original)
    def collective(*args: Any, **kwargs: Any) -> Any:
        if async_at is not None and (
            kwargs["async_op"] if "async_op" in kwargs else len(args) > async_at and args[async_at]
        ):
            return original(*args, **kwargs)
        # dynamo may trace this (a compiled function calling a collective): a constant first
        if compiling() or T.off or (not T.active and not _activate()):
            return original(*args, **kwargs)
        t0, ev = _begin()
        try:
            return original(*args, **kwargs)
        finally:
            try:
                _end(t0, ev)
            except Exception as exc:  # noqa: BLE001 - promise 1
                _fail(exc)

    collective.__trainmeter_original__ = original  # type: ignore[attr-defined]
    return collective


#: The Python-level collectives timed whole when they block. The deprecated spellings
#: (`all_gather_into_tensor`, `reduce_scatter_tensor`, ...) are left as they are, so their
#: warning still points at the user's line: they call the `_single` ones (FSDP2 calls those
#: too), which are timed, or end in `Work.wait()`.
COLLECTIVES = (
    "all_reduce", "broadcast", "barrier", "all_gather", "all_gather_single",
    "reduce_scatter", "reduce_scatter_single", "reduce", "gather", "scatter", "all_to_all",
    "all_to_all_single", "all_gather_object", "broadcast_object_list", "gather_object",
    "scatter_object_list", "monitored_barrier", "send", "recv", "send_object_list",
    "recv_object_list", "_broadcast_coalesced",
)


def _async_at(function: Any) -> int | None:
    """Where `async_op` sits among the function's positional parameters (None: it has none)."""
    import inspect

    try:
        names = list(inspect.signature(function).parameters)
    except (TypeError, ValueError):  # a C function (`_broadcast_coalesced`): always blocks
        return None
    return names.index("async_op") if "async_op" in names else None


#: Every DistributedDataParallel made in this process (weakly held).
_ddps: Any = None


def _wrap_ddp_init(original: Any) -> Any:
    """A DDP model is made: from now on, each backward while it syncs is watched."""

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        try:
            if _ddps is not None:
                _ddps.add(self)
                # from the first DDP model on: a process without one pays no wrapper on its
                # backward (three calls a step)
                _patch(T.autograd, "backward", _wrap_backward)
        except Exception as exc:  # noqa: BLE001 - promise 1
            _fail(exc)

    __init__.__trainmeter_original__ = original  # type: ignore[attr-defined]
    return __init__


def _wrap_backward(original: Any) -> Any:
    """`torch.autograd.backward`: with a DDP model syncing its gradients, time DDP's wait."""
    compiling = T.compiling

    @functools.wraps(original)
    def backward(tensors: Any, *args: Any, **kwargs: Any) -> Any:
        if not compiling() and _ddps and not T.off:
            try:
                if any(getattr(d, "require_backward_grad_sync", False) for d in _ddps):
                    _watch(tensors)
            except Exception as exc:  # noqa: BLE001 - promise 1
                _fail(exc)
        return original(tensors, *args, **kwargs)

    backward.__trainmeter_original__ = original  # type: ignore[attr-defined]
    return backward


def _first_nodes(out: Any, limit: int = 4) -> list[Any]:
    """Autograd nodes of up to `limit` of the tensors a backward starts from (a tensor, or a
    sequence of them): the backward reaches them before any parameter's gradient."""
    found: list[Any] = []
    stack = [out]
    while stack and len(found) < limit:
        item = stack.pop()
        node = getattr(item, "grad_fn", None) if isinstance(item, T.tensor_cls) else None
        if node is not None:
            if node not in found:
                found.append(node)
        elif isinstance(item, (tuple, list)):
            stack.extend(reversed(item[:limit]))
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())[:limit]))
    return found


def _watch(out: Any) -> None:
    """This backward will sync DDP's gradients: time the reducer's wait at its end."""
    nodes = _first_nodes(out)
    if not nodes:
        return
    box = [False]  # queued for this backward already (several outputs)

    def pre(grad_outputs: Any) -> None:
        if not box[0]:
            box[0] = True
            try:
                T.engine.queue_callback(_graph_done)
            except Exception as exc:  # noqa: BLE001 - promise 1
                _fail(exc)

    for node in nodes:
        node.register_prehook(pre)


def _graph_done() -> None:
    """First final callback: this rank's backward is computed; DDP's wait comes next."""
    try:
        if T.off or (not T.active and not _activate()):
            return
        t0, ev = _begin()
        T.tail = True
        T.engine.queue_callback(lambda: _reduced(t0, ev))
    except Exception as exc:  # noqa: BLE001 - promise 1
        _fail(exc)


def _reduced(t0: float, ev: Any) -> None:
    """Second final callback, queued after DDP's: every bucket's all-reduce is done."""
    try:
        T.tail = False
        _end(t0, ev)
    except Exception as exc:  # noqa: BLE001 - promise 1
        _fail(exc)


# ---- the sender's side ----------------------------------------------------------------------


def _read_back(latest: int) -> int | None:
    """Sender thread: add the device-timed waits whose end event completed (never waits for
    one); return the first step that still has one pending, or None. A wait still pending
    `STALE_STEPS` steps after its own (an event that will never complete) counts its host
    time, so the records never stall."""
    pending = T.pending
    while pending:
        step, start, end, host, span = pending[0]
        stale = step < latest - STALE_STEPS
        if not stale and not end.query():
            return int(step)
        try:
            dt = host if stale else max(start.elapsed_time(end) / 1000.0, host)
        except Exception:  # noqa: BLE001 - an event that cannot be read: the host time
            dt = host
        pending.popleft()
        if not stale:
            T.events.extend((start, end))
        entry = T.dev.setdefault(step, [0.0, 0.0, 0])
        entry[0] += dt
        if span:
            entry[1] += dt
        entry[2] += 1
    return None


def drain() -> None:
    """Sender thread: one `comm` record for the steps marked since the last one, each of whose
    waits is known (device-timed ones read back)."""
    marks = T.marks
    if not marks:
        return
    last_mark = marks[-1]  # every wait of the steps up to here was recorded before it
    blocked = _read_back(last_mark[0])
    mark = None
    while marks and (blocked is None or marks[0][0] < blocked) and marks[0][0] <= last_mark[0]:
        mark = marks.popleft()
    if mark is None:
        return
    n, t, s, spans_s, calls = mark
    n0, s0, spans0, calls0 = T.sent
    if n <= n0:
        return
    d_s, d_spans, d_calls = s - s0, spans_s - spans0, calls - calls0
    for step in [k for k in T.dev if k <= n]:
        dev_s, dev_spans, dev_calls = T.dev.pop(step)
        d_s += dev_s
        d_spans += dev_spans
        d_calls += int(dev_calls)
    T.sent = (n, s, spans_s, calls)
    sender = get_sender()
    if sender is None:
        return
    d = COMM.build(
        k=n - n0,
        n=n,
        s=max(d_s, 0.0),
        spans_s=max(d_spans, 0.0),
        calls=d_calls,
        timed="device" if T.device_used else "host",
    )
    sender.send(COMM.name, d, t=t)


# ---- attaching ------------------------------------------------------------------------------


def _fail(exc: BaseException) -> None:
    T.off = True
    T.tail = False
    guard.off(PROBE, exc)


def _patch(owner: Any, name: str, wrap: Any) -> None:
    original = getattr(owner, name, None)
    if callable(original) and not hasattr(original, "__trainmeter_original__"):
        setattr(owner, name, wrap(original))


def attach(torch: Any) -> list[str]:
    """Patch the places a rank waits. The probe is listed (`collectives`) only once it counts:
    at the first wait in a group of two ranks or more."""
    import torch.distributed as dist

    if not dist.is_available():
        return []
    T.cuda = torch.cuda
    T.compiling = compile_support.compiling_check(torch)
    T.engine = torch.autograd.Variable._execution_engine
    T.tensor_cls = torch.Tensor
    c_module = torch._C._distributed_c10d
    for cls in vars(c_module).values():  # Work, and the kinds of handle with a wait of their own
        if isinstance(cls, type) and issubclass(cls, c_module.Work) and "wait" in vars(cls):
            _patch(cls, "wait", _wrap_wait)
    from torch.distributed import distributed_c10d as c10d

    for name in COLLECTIVES:
        original = getattr(dist, name, None)
        if not callable(original) or hasattr(original, "__trainmeter_original__"):
            continue
        if getattr(original, "__deprecated__", None) is not None:
            continue  # a later torch that deprecates one: its warning keeps the user's line
        wrapped = _wrap_collective(original, _async_at(original))
        setattr(dist, name, wrapped)
        if getattr(c10d, name, None) is original:  # the module's own calls between them
            setattr(c10d, name, wrapped)
    global _ddps
    import weakref

    from torch.nn.parallel import distributed as ddp

    _ddps = weakref.WeakSet()
    _patch(ddp.DistributedDataParallel, "__init__", _wrap_ddp_init)
    T.autograd = torch.autograd  # `backward` wrapped at the first DDP model
    return []
