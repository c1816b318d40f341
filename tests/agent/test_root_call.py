"""The root's calls are counted by its class (`steps._CallPatch`), not by a hook on it: what that
must keep true, in this process, with real torch modules and optimizers."""

from __future__ import annotations

import copy
import pickle
import sys
from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.nn.modules import module as nn_module  # noqa: E402

from trainmeter.agent.probes import step_signal, step_state, steps  # noqa: E402


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(16, 4)
        self.out = nn.Linear(4, 16)

    def forward(self, ids, attention_mask=None):  # noqa: ANN001, ANN201
        return self.out(self.emb(ids)).float().pow(2).mean()


class SubNet(Net):
    pass


_STATE = ("root", "root_vars", "first_done", "fast", "ids_dtype", "plain_dtype", "solo_ref", "depth", "n_steps")
_STATE += ("n_tokens", "n_real")
_STATE += ("n_missing", "n_micro", "c_micro", "t", "sent", "hdr")


@pytest.fixture
def probe():
    """The step probe attached for one test, then taken off with its counts put back (other
    tests in this process read the step count)."""
    saved = {k: getattr(step_state.state, k) for k in _STATE}
    header = bytes(step_state.state.hdr)
    cycle = dict(step_state.state.cycle)
    by_backward = step_signal.by_backward
    before = steps.totals()
    steps.attach(torch)
    yield lambda: _since(before)
    steps.detach()
    for k, v in saved.items():
        setattr(step_state.state, k, v)
    step_state.state.hdr[: len(header)] = header
    step_state.state.cycle.clear()
    step_state.state.cycle.update(cycle)
    step_signal.by_backward = by_backward


def _since(before: steps.Totals) -> tuple[int, int, int, int]:
    now = steps.totals()  # whole steps, as published
    return (
        now.steps - before.steps,
        now.micro - before.micro,
        now.tokens - before.tokens,
        now.real - before.real,
    )


def _step(model: nn.Module, opt: torch.optim.Optimizer, *args, **kwargs) -> None:
    model(*args, **kwargs).backward()
    opt.step()
    opt.zero_grad()


def test_the_roots_class_counts_its_calls_and_only_the_root(probe):
    model, other = Net(), Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ids = torch.randint(0, 16, (3, 5))
    for _ in range(3):
        _step(model, opt, ids)
        other(ids)  # the same class in training mode, not the root: not a micro-batch
    assert steps.root() is model
    assert "__call__" in Net.__dict__ and "__call__" not in model.__dict__
    assert probe() == (3, 3, 45, 0)
    with torch.no_grad():
        model.eval()
        model(ids)  # eval calls are not micro-batches
        model.train()
    mask = torch.ones(3, 5, dtype=torch.long)
    mask[0, 3:] = 0
    _step(model, opt, ids=ids, attention_mask=mask)
    assert probe() == (4, 4, 60, 13)  # keyword call: the general path, padding read from the mask


def test_a_tensor_fed_again_is_known_from_step_to_step_by_its_version(probe):
    """The fast paths keep the last batch (token ids strongly, anything else weakly) and what
    was read of it from one step to the next: fed again in a new step it is new data, fed
    again in the same step it is not, refilled in place it is new data with its size read
    again. Worked by hand: the counts of each step are in the comments."""
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ids = torch.randint(0, 16, (3, 5))
    for _ in range(3):
        _step(model, opt, ids)  # 1 batch of 15 tokens a step
    model(ids)
    _step(model, opt, ids)  # the same batch twice: 1 batch, 15 tokens
    model(ids)
    with torch.no_grad():
        ids.random_(0, 16)  # refilled in place: new data
    _step(model, opt, ids)  # 2 batches, 30 tokens
    _step(model, opt, ids[:2])  # a new tensor of 2 x 5: 10 tokens
    assert probe() == (6, 7, 100, 0)


def test_a_float_batch_fed_again_and_a_gradient_penalty_leaf_keep_their_rules(probe):
    """The float fast path keeps a weak reference to the last batch and its shape, read once per
    tensor; the shape still tells a leaf that requires grad (a gradient penalty's input) from
    data, in the step where the batch was fed and only there."""
    model = nn.Sequential(nn.Linear(4, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(2, 4)

    def step(*inputs: torch.Tensor) -> None:
        sum(model(i).sum() for i in inputs).backward()
        opt.step()
        opt.zero_grad()

    for _ in range(3):
        step(x, x)  # the same batch twice a step: 1
    with torch.no_grad():
        y = x.clone()
    step(x, y)  # another tensor: 2
    penalty = x.detach().clone().requires_grad_(True)
    step(x, penalty)  # a leaf that requires grad shaped like this step's batch: not data, 1
    step(penalty, x)  # the same leaf first in a step: data, then x: 2
    model(x)
    with torch.no_grad():
        x.add_(1.0)  # refilled in place
    step(x)  # 2
    assert probe()[:2] == (7, 1 + 1 + 1 + 2 + 1 + 2 + 2)


def test_detach_puts_the_class_back_and_a_subclass_keeps_its_own_call(probe):
    model = SubNet()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    _step(model, opt, torch.randint(0, 16, (2, 4)))
    assert "__call__" in SubNet.__dict__ and "__call__" not in Net.__dict__
    steps.detach()
    assert "__call__" not in SubNet.__dict__
    assert SubNet.__call__ is nn.Module.__call__


def test_copies_of_a_counted_model_are_plain_models(probe):
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ids = torch.randint(0, 16, (2, 4))
    _step(model, opt, ids)
    twin = copy.deepcopy(model)  # an EMA copy, say
    loaded = pickle.loads(pickle.dumps(model))
    assert "__call__" not in twin.__dict__ and "__call__" not in loaded.__dict__
    with torch.no_grad():
        assert torch.equal(twin(ids), model(ids)) and torch.equal(loaded(ids), model(ids))
    assert probe()[:2] == (1, 1)
    assert steps.pending_micro() == 0  # calls with gradients off are evaluation, never counted
    model(ids), twin(ids), loaded(ids)
    assert steps.pending_micro() == 1  # model's training-mode call is pending; the copies' are not


def test_a_root_compiled_in_place_after_eager_steps_counts_each_call_once(probe):
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ids = torch.randint(0, 16, (2, 4))
    for _ in range(2):
        _step(model, opt, ids)
    model.compile(backend="eager")
    for _ in range(2):
        _step(model, opt, ids)
    assert probe() == (4, 4, 32, 0)


def test_the_counted_root_called_inside_a_compiled_function_keeps_one_full_graph(probe):
    from torch._dynamo.utils import counters

    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ids = torch.randint(0, 16, (2, 4))
    _step(model, opt, ids)  # adopted eagerly: its class now counts its calls
    assert "__call__" in Net.__dict__

    @torch.compile(backend="eager", fullgraph=True)  # a graph break would raise
    def loss_of(m: nn.Module, x: torch.Tensor) -> torch.Tensor:
        return m(x)

    torch._dynamo.reset()
    counters.clear()
    for _ in range(3):
        with torch.no_grad():
            eager = model(ids)
        assert torch.equal(loss_of(model, ids).detach(), eager)
    assert counters["stats"]["unique_graphs"] == 1  # our globals changed between calls: no recompile


def test_the_steady_post_hook_commits_a_step_exactly_as_step_totals_commit_does(probe):
    """`steps._after_step` writes `step_totals.commit` out for the settled optimizer (a call
    there would cost a tenth of the step): both must leave the same state, publish the same
    totals and tell the same listeners, or one of them drifted."""
    from trainmeter.agent.probes import step_totals

    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ids = torch.randint(0, 16, (3, 5))
    for _ in range(3):
        _step(model, opt, ids[:, :4])
    s = step_state.state
    assert s.solo_ref() is opt  # settled: the next step takes the written-out path

    heard: list[int] = []
    steps.step_listeners.append(heard.append)
    fields = ("c_micro", "c_calls", "last_ver", "n_steps", "n_micro", "n_calls", "n_tokens")
    try:
        model(ids).backward()
        before = {k: getattr(s, k) for k in fields}
        header = bytes(s.hdr)
        opt.step()  # the post-hook's steady path
        by_hook = ({k: getattr(s, k) for k in fields}, step_totals.totals()._replace(t=0), list(heard))

        for k, v in before.items():  # the same moment again, committed by the function
            setattr(s, k, v)
        s.hdr[: len(header)] = header
        heard.clear()
        step_totals.commit()
        by_commit = ({k: getattr(s, k) for k in fields}, step_totals.totals()._replace(t=0), list(heard))
    finally:
        steps.step_listeners.remove(heard.append)
    assert by_hook == by_commit
    assert by_hook[0]["n_steps"] == before["n_steps"] + 1 and by_hook[0]["last_ver"] == -1
    assert by_hook[1].tokens == before["n_tokens"] and by_hook[2] == [before["n_steps"] + 1]


def _entered(call: Callable[[], Any]) -> list[str]:
    """The qualified names of the Python functions entered and the C functions called while
    `call()` runs."""
    names: list[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            names.append(frame.f_code.co_qualname)
        elif event == "c_call":
            names.append(getattr(arg, "__qualname__", repr(arg)))

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return names


def _root_dispatch(call: Callable[[], Any]) -> list[str]:
    """What `call()` enters and calls between the root's class `__call__` and `Net.forward`."""
    names = _entered(call)
    return names[names.index("_root_call.<locals>.__call__") + 1 : names.index("Net.forward")]


def _steady(model: nn.Module, ids: torch.Tensor) -> torch.optim.Optimizer:
    """Three steps of `model`: adopted, its first iteration watched and done, discovery's global
    hooks gone."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        _step(model, opt, ids)
    assert steps.root() is model
    assert not any(  # nothing hooks a module call anywhere: the test below would not hold
        (
            nn_module._global_forward_pre_hooks,
            nn_module._global_forward_hooks,
            nn_module._global_backward_pre_hooks,
            nn_module._global_backward_hooks,
            model._forward_pre_hooks,
            model._forward_hooks,
        )
    )
    return opt


def test_a_counted_call_with_nothing_hooked_calls_the_forward_in_place_of_torchs_call_impl(probe):
    """`Module._call_impl` with no hook calls the forward and nothing else, after a frame with six
    closure cells and a pybind11 call (`_get_tracing_state`): ~6,800 instructions, most of a
    module call's cost. A counted call makes that test itself and calls the forward: the same
    forward, the same result, and torch's path for every call that is not counted."""
    model = Net()
    ids = torch.randint(0, 16, (3, 5))
    opt = _steady(model, ids)
    assert _root_dispatch(lambda: model(ids)) == ["is_dynamo_compiling", "is_grad_enabled"]
    assert steps.pending_micro() == 1
    twin = copy.deepcopy(model)  # the same class, not the root: torch's own path
    assert "Module._call_impl" in _root_dispatch(lambda: twin(ids))
    assert torch.equal(model(ids), twin(ids))
    with torch.no_grad():  # not counted: torch's path
        assert "Module._call_impl" in _root_dispatch(lambda: model(ids))
    opt.zero_grad()
    with pytest.raises(TypeError):  # the forward's own error, as torch would raise it
        model(ids, 1, 2)
    assert probe()[:2] == (3, 3)


def test_hooks_set_on_a_counted_root_at_any_time_run_as_torch_runs_them(probe):
    """Each kind of hook a user (or DDP, FSDP, a profiler) may put on the root or on every
    module, registered after the root's calls are counted: from the next call on, that call
    takes torch's `_call_impl` and the hook runs (a forward hook's result is the call's result);
    removed, the next call calls the forward again. The counts stay those of the loop."""
    model = Net()
    ids = torch.randint(0, 16, (3, 5))
    opt = _steady(model, ids)
    seen: list[str] = []

    def note(name: str) -> Callable[..., None]:
        return lambda *args: seen.append(name)

    def zeroed(module: nn.Module, args: Any, out: torch.Tensor) -> torch.Tensor:
        seen.append("forward")
        return out * 0.0

    registrations = {
        "forward pre": lambda: model.register_forward_pre_hook(note("forward pre")),
        "forward": lambda: model.register_forward_hook(zeroed),
        "backward pre": lambda: model.register_full_backward_pre_hook(note("backward pre")),
        "backward": lambda: model.register_full_backward_hook(note("backward")),
        "global forward pre": lambda: nn_module.register_module_forward_pre_hook(
            note("global forward pre")
        ),
        "global forward": lambda: nn_module.register_module_forward_hook(note("global forward")),
        "global backward pre": lambda: nn_module.register_module_full_backward_pre_hook(
            note("global backward pre")
        ),
        "global backward": lambda: nn_module.register_module_full_backward_hook(
            note("global backward")
        ),
    }
    for name, register in registrations.items():
        handle = register()
        try:
            assert "Module._call_impl" in _root_dispatch(lambda: model(ids))
            if name == "forward":  # the hook's result is the call's
                assert model(ids).item() == 0.0 and model(ids).requires_grad
            _step(model, opt, ids)
        finally:
            handle.remove()
        assert name in seen, name
        seen.clear()
        assert "Module._call_impl" not in _root_dispatch(lambda: model(ids))
        assert not seen, name
        opt.zero_grad()
    assert probe()[:2] == (3 + 8, 3 + 8)


def test_a_forward_set_on_the_instance_or_a_call_impl_set_on_the_class_is_called(probe):
    """What torch would call, the counted call calls: a forward put on the instance (Accelerate
    wraps the forward so), and a `_call_impl` put on the class after the root was adopted (as
    `torch._dynamo.disable` does to a class)."""
    model = Net()
    ids = torch.randint(0, 16, (3, 5))
    _steady(model, ids)
    seen: list[str] = []
    forward = model.forward

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        seen.append("forward")
        return forward(*args, **kwargs)

    model.forward = wrapped  # type: ignore[method-assign]
    model(ids)
    del model.forward
    assert seen == ["forward"]

    def call_impl(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
        seen.append("call_impl")
        return nn.Module._call_impl(self, *args, **kwargs)

    Net._call_impl = call_impl  # type: ignore[method-assign]
    try:
        model(ids)
    finally:
        del Net._call_impl
    assert seen == ["forward", "call_impl"]
    model(ids)
    assert seen == ["forward", "call_impl"]
    assert steps.pending_micro() == 1  # the same batch three times in the step: one


def test_a_counted_root_traced_by_torchscript_keeps_its_scope(probe):
    """`torch.jit.trace` of a module that holds the root names each node by the modules it ran
    in (`_slow_forward`, while `torch.jit._trace._trace_module_map` is set): a counted call
    takes torch's path then, and the traced graph is the one torch traces uncounted."""
    model = Net()
    ids = torch.randint(0, 16, (3, 5))
    _steady(model, ids)
    twin = copy.deepcopy(model)  # not the root: traced by torch's own path

    def scopes(module: nn.Module) -> list[str]:
        traced = torch.jit.trace(nn.Sequential(module), (ids,), check_trace=False)
        return [node.scopeName() for node in traced.inlined_graph.nodes()]

    ours = scopes(model)
    assert steps.pending_micro() == 1  # the trace's call of the root was counted
    assert ours == scopes(twin)
    assert "__module.0" in ours  # the root's own scope
