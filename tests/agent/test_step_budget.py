"""The agent's cost per optimizer step, counted: a budget that cannot drift unseen.

Every microsecond the agent spends on a step is the user's. Timing it in a test would be noise on
a shared machine; counting is not: `sys.setprofile` sees every Python function the agent enters
and every C function it calls, the same on every machine and every run. The count is taken on a
fixed loop in the steady state (after the first steps, when the root, its parts, the precision
and the shape are settled and their hooks are gone) and compared with the budget written here.

The count runs in a forked copy of this process (torch already imported, so it costs no start-up)
with a fresh agent attached as `boot` attaches it in every Python `tm` starts; the fork keeps its
hooks and patches out of the other tests. Only the training thread is counted (the sender
thread's work runs on its own clock, not on the step).

If a change needs more calls per step, it says why beside a new budget, here.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")

#: Calls the agent makes in one steady step of each fixed loop (`LOOPS`), single process: each
#: function of ours entered, and each call our frames make (into C, into torch, or into the
#: user's code). Every loop pays the root's class `__call__` (`steps._root_call`) with
#: `is_dynamo_compiling`, `is_grad_enabled` and the root's forward, called in place of torch's
#: own `_wrapped_call_impl` and, nothing hooking the model, of its `_call_impl` and that one's
#: `_get_tracing_state` (tests/agent/test_root_call.py; the steady step's `_call_impl` until 6
#: December, afternoon: the same count here, two calls fewer in the whole step): 4. Then:
#: - tokens (`model(ids[:, :-1])`, an embedding LM, SGD: a new token tensor each step):
#:   `Tensor.dim` and `numel` (2; none when the same tensor is fed again); the optimizer's
#:   post-hook `_after_step` with `is_dynamo_compiling`, and the commit written out in it:
#:   `monotonic` and `pack_into` (4): 10;
#: - float input (`model(x)`, an MLP, SGD, the same `x` each step): `len` (1; the weak
#:   reference to `x` and its shape are kept from step to step: a new tensor would add the
#:   reference and the shape, which are no calls the profiler sees); the same post-hook (4): 9;
#: - hand SGD (no optimizer, `p.add_(p.grad, alpha=-lr)`: each backward through the root's
#:   output is the step): `len` (1); the pre-hook put on the output's `grad_fn`
#:   (`step_signal.watch`, `first_grad_fn`, `isinstance`, `register_prehook`, torch's
#:   `_register_hook`: 5); when the backward reaches it `_on_backward` with
#:   `is_dynamo_compiling` and `_current_graph_task_id`, `_backward_step`, `say`, `commit`
#:   with `monotonic` and `pack_into` (8): 18.
#: On 6 December (before issue 30) the same count was 20 for the float loop: the memory probe
#: read on every step, the tokens looked for in every call of a model fed floats, the step
#: signal named and a weak reference made at every step, and (since) the collectives probe's
#: wrapper on every backward of a process with no DDP model (3 calls and torch's own). On 7
#: December: 12, 12 and 19, before the commit was written out in the post-hook, the optimizer
#: compared without `id()`, and the token tensor's `dim` and `numel` read once per tensor.
BUDGET = {"tokens": 10, "float": 9, "hand": 18}

#: Attributes of torch tensors the agent reads in one steady step of each loop: each is a C
#: getter of torch's, which the profiler does not see as a call but which costs what a call
#: does (about 50 ns each here: torch asks at every read whether a `__torch_function__`
#: override applies). Counted by a TorchFunctionMode active for the counted steps (every getter
#: dispatches to it while it is on) and kept when the read is made in the agent's frames.
#: - tokens (a new slice each step): its `dtype` and `_version` (2);
#: - tokens_same (the same token tensor each step, `run_all.py --only hooks`' call): its
#:   `_version` alone (1: the batch kept from the last step is known by identity; its dtype
#:   and size are not read again). Its calls: the tokens loop's 10 less `dim` and `numel`: 8;
#: - float (the same `x` each step): `requires_grad` and `_version` (2);
#: - hand: the same two, and the output's `grad_fn` where the step signal hooks it (3).
#: On 6 December (main 2ac8301): 2, 2, 3 and 4 (the kept batch's `dtype` read at every call).
READS = {"tokens": 2, "tokens_same": 1, "float": 2, "hand": 3}
BUDGET["tokens_same"] = 8

#: The float loop with one blocking `torch.distributed.all_reduce` a step in a group of two
#: ranks (gloo): the float step's 9; the collectives probe's step listener (the guard `call`,
#: `_on_step`, `last_step_t`, `deque.append`: 4); the timed collective (its wrapper, `len`,
#: `is_dynamo_compiling`, `_begin` with `perf_counter` and `is_initialized`, torch's logging
#: wrapper it calls, `_end` with `perf_counter` and `phases.in_span`: 10), and the `Work.wait()`
#: inside it, timed again and not counted (its wrapper, `is_dynamo_compiling`, `_begin`, `_end`
#: and theirs). A single process pays none of it (the probe stays off).
BUDGET_COLLECTIVE = 9 + 4 + 10 + 7

WARM_STEPS = 50  # past the first step's one-off work (root, parts, shape, FLOPs, precision)
COUNTED_STEPS = 40


def _float_loop(collective: list[bool]) -> Callable[[], None]:
    """A fixed training step of an MLP fed floats; with `collective[0]` set, one `all_reduce`
    (gloo) after it, as a data-parallel loop has (the process group must be up by then). (Each
    loop takes a switch its child may turn on for a second round.)"""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    total = torch.zeros(1)

    def step() -> None:
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        if collective[0]:
            torch.distributed.all_reduce(total)

    return step


def _tokens_loop(same: list[bool]) -> Callable[[], None]:
    """A language model's step: token ids in (a new slice of `ids` each step; with `same[0]`
    set, one tensor every step), next-token loss, SGD."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(32, 8), torch.nn.Linear(8, 32))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    ids = torch.randint(0, 32, (4, 8))
    fixed = ids[:, :-1].clone()

    def step() -> None:
        logits = model(fixed if same[0] else ids[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 32), ids[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()

    return step


def _hand_loop(collective: list[bool]) -> Callable[[], None]:
    """Weights updated by hand, no optimizer (pytorch/examples' regression script)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    x, y = torch.randn(4, 8), torch.randn(4, 1)

    def step() -> None:
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                p.add_(p.grad, alpha=-0.01)
                p.grad = None

    return step


LOOPS = {"tokens": _tokens_loop, "float": _float_loop, "hand": _hand_loop}


def _fresh_agent(tmp: str, loop: str, rank: int) -> None:
    """In the forked child: forget every trainmeter module and hook the other tests left, bind a
    socket for the sender, and start the agent as `sitecustomize` does; torch is imported, so it
    attaches at once."""
    for name in [n for n in sys.modules if n == "trainmeter" or n.startswith("trainmeter.")]:
        del sys.modules[name]
    from torch.nn.modules import module as nn_module
    from torch.optim import optimizer as optim_module

    for hooks in (
        optim_module._global_optimizer_pre_hooks,
        optim_module._global_optimizer_post_hooks,
        nn_module._global_forward_pre_hooks,
        nn_module._global_forward_hooks,
    ):
        hooks.clear()
    for cls, name in ((optim_module.Optimizer, "__init__"), (nn_module.Module, "compile")):
        original = getattr(getattr(cls, name, None), "__trainmeter_original__", None)
        if original is not None:
            setattr(cls, name, original)
    path = os.path.join(tmp, f"ingest.{loop}.{rank}.sock")
    sink = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sink.bind(path)
    _keep.append(sink)
    os.environ["TRAINMETER_SOCKET"] = path
    os.environ.update(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank))
    from trainmeter.agent import boot

    boot.start()


_keep: list[Any] = []


def _count(step: Callable[[], None]) -> list[int]:
    """The agent's calls in each of COUNTED_STEPS steps: every call and C call made in a frame
    of the `trainmeter` package or below one, the package's own frames included."""
    import trainmeter

    package = os.path.dirname(trainmeter.__file__)
    ours: dict[Any, bool] = {}
    counts: list[int] = []
    now = [0]

    def mine(frame: Any) -> bool:
        if frame is None:
            return False
        code = frame.f_code
        hit = ours.get(code)
        if hit is None:
            hit = ours[code] = code.co_filename.startswith(package)
        return hit

    def profile(frame: Any, event: str, arg: Any) -> None:
        # the agent's own frames, and each call they make: into C, into torch, or into the
        # user's code (the root's forward, which the class patch calls in torch's place)
        if event == "c_call":
            now[0] += mine(frame)
        elif event == "call":
            now[0] += mine(frame) or mine(frame.f_back)

    for _ in range(COUNTED_STEPS):
        now[0] = 0
        sys.setprofile(profile)
        step()
        sys.setprofile(None)
        counts.append(now[0])
    return counts


def _count_reads(step: Callable[[], None]) -> list[int]:
    """The tensor attributes the agent reads in each of COUNTED_STEPS steps (see `READS`): a
    TorchFunctionMode sees every getter while it is on; a read made in a frame of the
    `trainmeter` package is the agent's."""
    from torch.overrides import TorchFunctionMode

    import trainmeter

    package = os.path.dirname(trainmeter.__file__)
    now = [0]

    class Reads(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
            if getattr(func, "__name__", None) == "__get__" and sys._getframe(
                1
            ).f_code.co_filename.startswith(package):
                now[0] += 1
            return func(*args, **(kwargs or {}))

    counts: list[int] = []
    for _ in range(COUNTED_STEPS):
        now[0] = 0
        with Reads():
            step()
        counts.append(now[0])
    return counts


def _child(tmp: str, loop: str, rank: int) -> dict[str, Any]:
    """In a fork: one loop counted. The float loop's two ranks also count it with one more
    step listener (the counter must see it), then with one collective a step in a group of two
    ranks (the other fork)."""
    import torch.distributed as dist

    torch.set_num_threads(1)  # a forked child of a process that used torch's thread pool
    _fresh_agent(tmp, loop, rank)
    collective = [False]
    step = LOOPS[loop](collective)
    for _ in range(WARM_STEPS):
        step()
    from trainmeter.agent.probes import steps

    out: dict[str, Any] = {"plain": _count(step), "root": type(steps.root()).__name__}
    out["reads"] = _count_reads(step)
    out["steps"] = steps.step_count()
    if loop == "tokens":  # then the same token tensor every step
        collective[0] = True
        for _ in range(WARM_STEPS):
            step()
        out["same"] = _count(step)
        out["same_reads"] = _count_reads(step)
        out["steps"] = steps.step_count()
    if loop != "float":
        return out
    steps.step_listeners.append(lambda n: None)
    out["listener"] = _count(step)
    steps.step_listeners.pop()
    dist.init_process_group("gloo", init_method=f"file://{tmp}/store", rank=rank, world_size=2)
    collective[0] = True
    for _ in range(WARM_STEPS):
        step()
    out["collective"] = _count(step)
    out["steps"] = steps.step_count()
    dist.barrier()
    dist.destroy_process_group()
    return out


def _imports_done() -> None:
    """What the loops import on first use (torch's optimizer pulls in dynamo: seconds), done
    here once, so that the forked children start from a warm process."""
    import torch.distributed  # noqa: F401 - imported for the children

    for loop in LOOPS.values():
        loop([False])()


def _fork(tmp: str, loop: str, rank: int) -> tuple[int, int]:
    """A child running `_child`; returns (its pid, the pipe its result comes on)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        status = 1
        try:
            os.close(read)
            os.write(write, json.dumps(_child(tmp, loop, rank)).encode())
            status = 0
        except BaseException as exc:  # noqa: BLE001 - reported to the parent, which fails
            os.write(write, json.dumps({"error": repr(exc)}).encode())
        finally:
            os._exit(status)
    os.close(write)
    return pid, read


def _result(pid: int, read: int) -> dict[str, Any]:
    data = b""
    while chunk := os.read(read, 1 << 16):
        data += chunk
    os.close(read)
    os.waitpid(pid, 0)
    result = json.loads(data or b'{"error": "the child said nothing"}')
    assert "error" not in result, result["error"]
    return result


@pytest.fixture(scope="module")
def counted() -> dict[str, Any]:
    """Each loop's counts, from forked children: the float loop's from rank 0 of two (the two
    ranks of the collective), the others each alone."""
    _imports_done()
    with tempfile.TemporaryDirectory(prefix="tm-budget-") as tmp:
        children = [_fork(tmp, "float", 0), _fork(tmp, "float", 1)]
        first, second = (_result(*child) for child in children)
        out = {"float": first}
        for loop in ("tokens", "hand"):
            out[loop] = _result(*_fork(tmp, loop, 0))
    assert _steady(first["collective"]) == _steady(second["collective"])  # the ranks agree
    return out


def _steady(counts: list[int]) -> int:
    """The count of the steady step: the one most steps have (a step that also reads the
    process's memory, about once a second, is the sender clock's and not the step's)."""
    return statistics.mode(counts)


@pytest.mark.parametrize("loop", list(LOOPS))
def test_a_steady_step_costs_the_agent_at_most_its_budget(counted, loop: str) -> None:
    got = counted[loop]
    assert got["root"] == "Sequential"  # the agent found the model and counts it
    # every step counted (the float loop's ranks also ran the listener and collective rounds,
    # the tokens loop its round on one tensor; each loop its round counting reads)
    rounds = {"float": (2, 4), "tokens": (2, 4)}.get(loop, (1, 2))
    assert got["steps"] == rounds[0] * WARM_STEPS + rounds[1] * COUNTED_STEPS
    assert _steady(got["plain"]) <= BUDGET[loop], got["plain"]
    # anything else a step sometimes does stays rare: at most a few of the counted steps
    assert sum(c > BUDGET[loop] for c in got["plain"]) <= 2, got["plain"]


def test_the_same_token_tensor_each_step_costs_at_most_its_budget(counted) -> None:
    got = counted["tokens"]["same"]
    assert _steady(got) <= BUDGET["tokens_same"], got
    assert sum(c > BUDGET["tokens_same"] for c in got) <= 2, got


@pytest.mark.parametrize("loop", [*LOOPS, "tokens_same"])
def test_a_steady_step_reads_at_most_its_budget_of_tensor_attributes(counted, loop: str) -> None:
    got = counted["tokens"]["same_reads"] if loop == "tokens_same" else counted[loop]["reads"]
    assert _steady(got) <= READS[loop], got
    assert sum(c > READS[loop] for c in got) <= 2, got


def test_the_read_count_sees_a_read_the_agent_makes(counted) -> None:
    """The reads counter is not blind: the first steps of a new tensor each step read its dtype
    and version (`tokens`), one tensor kept from step to step only its version."""
    assert _steady(counted["tokens"]["reads"]) == _steady(counted["tokens"]["same_reads"]) + 1


def test_a_step_with_a_collective_costs_the_agent_at_most_its_budget(counted) -> None:
    got = counted["float"]["collective"]
    assert _steady(got) <= BUDGET_COLLECTIVE, got
    assert sum(c > BUDGET_COLLECTIVE for c in got) <= 2, got


def test_the_count_sees_a_call_the_agent_adds(counted) -> None:
    """The counter is not blind: a listener on every step shows as its calls (the guard that
    calls it, and the listener)."""
    got = counted["float"]
    assert _steady(got["listener"]) == _steady(got["plain"]) + 2, got["listener"]
