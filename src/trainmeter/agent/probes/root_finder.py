"""Which module is the model: the step probe's *root*, found cheaply.

A global forward pre-hook and an always-called global forward hook keep a depth counter; a
training-mode call entered at depth 0 is a root call. The first root module with parameters (a
loss module has none) is the model: its root. Global hooks push every module of every forward
onto torch's slow call path, so they live only until the root is found: then they are removed,
and the root's class counts its calls (`state.patch`, `steps._CallPatch`: cheaper than a hook on
the root, which would send every call down torch's slow path). Forwards with gradients off
(`torch.no_grad`, `inference_mode`: evaluation) never adopt a root.

When the same optimizer steps again with no root forward since, the model may have been
replaced: `steps` starts discovery again (`start`), which re-adopts the same root in place if
nothing changed. A root compiled in place (`module.compile()`) is found and counted from outside
its compiled call instead (`compiled_pre`, installed by `compile_support`).

Every hook here returns at once while dynamo traces it (`state.compiling()`), so torch.compile
sees no graph break, no guard and no recompile. Standard library only: torch is reached through
what `steps.attach` bound into `state`.
"""

from __future__ import annotations

import sys

from . import first_iteration
from . import step_signal as signal
from .step_state import adopted, call, state

TYPE_CHECKING = False  # typing costs milliseconds in every Python the run starts
if TYPE_CHECKING:
    from typing import Any

_NO_RESULT = object()


def root() -> Any:
    """The module whose training forwards are counted as micro-batches, or None."""
    return state.root


def pause(on: bool) -> None:
    """Stop (or resume) discovery while the agent itself runs a module (between steps only)."""
    state.depth = 1 << 30 if on else 0


def pre(module: Any, args: Any) -> None:
    """The global forward pre-hook, while discovering (and, once the root is found, while its
    first iteration is watched: `first_iteration`)."""
    s = state
    if s.compiling():
        return  # traced by dynamo: be a no-op in its graph (see the module docstring)
    if s.depth == 0 and s.learning:
        try:
            if module is not s.root and not first_iteration.called(module):
                first_iteration.end()  # a compiled module: the hooks go before it is traced
                return
        except Exception as exc:  # noqa: BLE001 - promise 1
            first_iteration.end()
            s.fail(exc)
            return
    elif s.depth == 0 and module.training and s.grad_on():
        try:
            if adopt(module) and not s.learning:
                return  # the global hooks are gone: no depth to keep
        except Exception as exc:  # noqa: BLE001 - promise 1
            s.fail(exc)
            return
    s.depth += 1


def post(module: Any, args: Any, *rest: Any) -> None:
    """The global forward hook (always called), while discovering or watching."""
    s = state
    if s.compiling():
        return
    s.depth -= 1
    if s.depth <= 0:
        s.depth = 0
        if s.learning and rest:
            try:
                first_iteration.returned(module, rest[0])
            except Exception as exc:  # noqa: BLE001 - promise 1
                first_iteration.end()
                s.fail(exc)


def adopt(module: Any, hooks: bool = True) -> bool:
    """Make the module of this outermost training-mode call the root, unless it has no
    parameters (a loss module) or its parameters are on the meta device: a copy of the model
    built there only to count its FLOPs or its memory before training (litgpt's
    `measure_flops`, Lightning's throughput utilities) holds no values and is never trained.
    Adopting before its forward runs keeps torch.compile from tracing the global hooks and
    recompiling once they are gone."""
    s = state
    if module is s.root and s.root_hook:
        # the root again, after a step without its forward: its class counted this call
        # already (`steps._root_call` runs before torch's hooks)
        remove(s.discovery)
        return True
    if module in s.rejected:
        return False
    first = next(iter(module.parameters()), None)
    if first is None or getattr(first, "is_meta", False):
        s.rejected.add(module)
        return False
    remove(s.root_hook)
    s.root, s.first_done, s.fast = module, False, False
    s.root_vars = root_vars(module)
    for listener in tuple(adopted):
        call(listener, module)
    # the global hooks stay on for the first iteration unless torch.compile is in use
    if not first_iteration.begin(module, hooks):
        remove(s.discovery)
    if not hooks:
        return True  # a root compiled in place: `compiled_pre` counts its calls
    s.root_hook.append(s.patch(type(module)))
    # this call began before its class counted calls: count it after its forward, once
    s.root_hook.append(
        module.register_forward_hook(_first_call, with_kwargs=True, always_call=True)
    )
    return True


class _Attributes:
    """`root_vars` of a module whose flag or hooks are not plain attributes: read each time."""

    __slots__ = ("module",)

    def __init__(self, module: Any) -> None:
        self.module = module

    def __getitem__(self, key: str) -> Any:
        return getattr(self.module, key)


#: What `steps._root_call` reads of the root as `[name]`: its training flag and its hooks
ROOT_VARS = (
    "training",
    "_forward_pre_hooks",
    "_forward_hooks",
    "_backward_pre_hooks",
    "_backward_hooks",
)


def root_vars(module: Any) -> Any:
    """Where `module.training` and its hook dictionaries (`ROOT_VARS`) can be read as
    `[name]` cheaply: its instance `__dict__`, where `nn.Module.__init__` puts them,
    unless its class makes one of them something else (a property)."""
    d = getattr(module, "__dict__", None)
    cls = type(module)
    if isinstance(d, dict) and all(k in d and not hasattr(cls, k) for k in ROOT_VARS):
        return d
    return _Attributes(module)


def _first_call(module: Any, args: Any, kwargs: Any, result: Any = _NO_RESULT) -> None:
    # with always_call, the exception path calls hook(module, args, result): nothing to count
    s = state
    if s.compiling():
        return
    try:
        if len(s.root_hook) > 1:
            s.root_hook.pop().remove()
        if result is not _NO_RESULT and module.training and module is s.root:
            s.count(module, args, kwargs)
            if signal.by_backward:
                signal.watch(result)
    except Exception as exc:  # noqa: BLE001 - promise 1
        s.fail(exc)


def compiled_pre(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Eagerly, before a module compiled in place runs its compiled call: what `pre` and
    `steps._root_call` would do, had dynamo not traced them."""
    s = state
    if not module.training or s.compiling() or not s.grad_on():
        return
    try:
        if module is s.root:
            if s.discovery:
                remove(s.discovery)  # the root again after a step without its forward
            if not s.root_hook:  # else its class counted this call already (`_root_call`)
                s.count(module, args, kwargs)
        elif s.discovery and s.depth == 0 and adopt(module, hooks=False):
            s.count(module, args, kwargs)
    except Exception as exc:  # noqa: BLE001 - promise 1
        s.fail(exc)


def start() -> None:
    """Put the two global hooks on: look for the root (at attach, or when it may have changed)."""
    s = state
    first_iteration.reset()  # a watch in progress is of a model that may be gone
    remove(s.discovery)
    s.depth = 0
    s.discovery.append(s.nn_module.register_module_forward_pre_hook(pre))
    s.discovery.append(s.nn_module.register_module_forward_hook(post, always_call=True))


def start_in_fork_child() -> None:
    """`start`, in a forked child whose parent had found its root: the same hooks, except that
    the first module call first asks whether this child is a DataLoader worker. A worker never
    trains, and its transforms are modules (torchvision's): it takes the hooks off at once,
    rather than sending every transform down torch's slow call path for its whole life."""
    s = state
    s.depth = 0
    s.discovery.append(s.nn_module.register_module_forward_pre_hook(_first_in_child))
    s.discovery.append(s.nn_module.register_module_forward_hook(post, always_call=True))


def _first_in_child(module: Any, args: Any) -> None:
    s = state
    if s.compiling():
        return
    try:
        if in_dataloader_worker():
            remove(s.discovery)  # nothing to find
            return
        if s.discovery:  # from now on the plain discovery hook
            s.discovery[0].remove()
            s.discovery[0] = s.nn_module.register_module_forward_pre_hook(pre)
    except Exception as exc:  # noqa: BLE001 - promise 1
        s.fail(exc)
        return
    pre(module, args)


def in_dataloader_worker() -> bool:
    """Whether this process is a DataLoader worker (forked or spawned): it loads, never trains."""
    data = sys.modules.get("torch.utils.data")
    info = getattr(data, "get_worker_info", None)
    return info is not None and info() is not None


def end() -> None:
    """Take off the global hooks and the root's class patch."""
    first_iteration.reset()
    remove(state.discovery)
    remove(state.root_hook)


def remove(handles: list[Any]) -> None:
    """Remove each hook handle in the list, emptying it."""
    while handles:
        try:
            handles.pop().remove()
        except Exception:  # noqa: BLE001 - promise 1: a hook torch already dropped
            pass
