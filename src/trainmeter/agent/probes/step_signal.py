"""What marks a step when no optimizer says so, and the `step_signal` fact that names the signal.

With a `torch.optim.Optimizer` in the process its `step()` is the step (`steps._after_step`).
Without one (weights updated by hand, `p.data.add_(p.grad, alpha=-lr)`, a functional update, an
optimizer class of the user's own) each backward pass through the root's output is the step:
`watch` puts a pre-hook on the `grad_fn` of a counted root call's output. That node belongs to
the call's autograd graph and is freed with it, so nothing of ours is reachable from the model
(`torch.save(model)` works). One backward call (one autograd graph task) counts once, and only
after a root forward since the last step; `steps` does the counting (`on_step`).

Which optimizer exists is seen by wrapping `torch.optim.Optimizer.__init__` (the class, never an
instance): from the first optimizer made, only optimizer steps count. Standard library only.
"""

from __future__ import annotations

import functools
import weakref

from ...payloads import FACT
from ..sender import get_sender

TYPE_CHECKING = False  # typing costs milliseconds in every Python the run starts
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

#: True while no torch.optim.Optimizer was made in this process (read on the hot path)
by_backward = True
_last_task = -1  # the autograd graph task of the last backward-counted step
_sent = ""  # the signal last named in a `step_signal` fact

_tensor_cls: Any = None
_compiling: Callable[[], bool] = bool
_graph_task: Callable[[], int] = int  # torch._C._current_graph_task_id (-1 outside backward)
_on_step: Callable[[], None] = lambda: None  # noqa: E731 - replaced at bind
_fail: Callable[[BaseException], None] = lambda exc: None  # noqa: E731 - replaced at bind
#: called as the process makes its first optimizer (`steps._forget_dry_run`, set at attach)
on_first_optimizer: Callable[[], None] = lambda: None  # noqa: E731
#: the torch.optim optimizers made in this process and still alive (weakly): one made for a
#: generator that steps after n_critic discriminator steps is known before it steps
#: (`step_cycle`)
made: weakref.WeakSet[Any] = weakref.WeakSet()

NOTES = {
    "optimizer": "optimizer.step() of torch.optim optimizers; several in one iteration count once",
    "backward": (
        "backward passes through the model's output: no torch.optim optimizer was made (weights "
        "updated by hand or by an optimizer of another kind); with gradient accumulation each "
        "micro-batch's backward counts as a step"
    ),
}


def bind(
    torch: Any,
    compiling: Callable[[], bool],
    on_step: Callable[[], None],
    fail: Callable[[BaseException], None],
) -> None:
    """Attach: `on_step` counts a backward-marked step, `fail` turns the steps probe off."""
    global _tensor_cls, _compiling, _graph_task, _on_step, _fail
    _tensor_cls, _compiling, _on_step, _fail = torch.Tensor, compiling, on_step, fail
    _graph_task = getattr(torch._C, "_current_graph_task_id", _graph_task)
    from torch.optim import optimizer as optim_module

    cls = optim_module.Optimizer
    if not hasattr(cls.__init__, "__trainmeter_original__"):
        cls.__init__ = _wrap_optimizer_init(cls.__init__)


def optimizer_made() -> None:
    """A torch.optim.Optimizer exists (or stepped): its steps are the steps from now on."""
    global by_backward
    by_backward = False


def _wrap_optimizer_init(original: Any) -> Any:
    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if by_backward:  # the first optimizer: what the root ran before it was no step's
            on_first_optimizer()
        optimizer_made()
        original(self, *args, **kwargs)
        try:
            made.add(self)
        except TypeError:  # an optimizer class without weak references: not known before it steps
            pass

    __init__.__trainmeter_original__ = original  # type: ignore[attr-defined]
    return __init__


def first_grad_fn(out: Any) -> Any:
    """The autograd node of the first output tensor that has one (a tensor, or one inside a
    tuple, list or dict such as a Hugging Face ModelOutput); None when there is none."""
    if isinstance(out, _tensor_cls):
        return out.grad_fn
    items = out.values() if isinstance(out, dict) else out if isinstance(out, (tuple, list)) else ()
    for item in items:
        if isinstance(item, _tensor_cls) and item.grad_fn is not None:
            return item.grad_fn
    return None


def watch(out: Any) -> None:
    """Hook the backward of this root call's output (the node dies with its graph)."""
    try:
        node = first_grad_fn(out)
        if node is not None:
            node.register_prehook(_on_backward)
    except Exception as exc:  # noqa: BLE001 - promise 1
        _fail(exc)


def _on_backward(grad_outputs: Any) -> None:
    """A backward pass reached the root's output: with no optimizer, that is the step (once per
    backward call)."""
    global _last_task
    if _compiling() or not by_backward:
        return
    try:
        task = _graph_task()
        if task == _last_task and task >= 0:
            return
        _last_task = task
        _on_step()
    except Exception as exc:  # noqa: BLE001 - promise 1
        _fail(exc)


def say(kind: str, note: str | None = None) -> None:
    """Name the signal that counts the steps (once per change): the provenance of `steps`.
    `none` (with its note) when the process ends having seen no signal at all."""
    global _sent
    if _sent == kind:
        return
    _sent = kind
    sender = get_sender()
    if sender is not None:
        d = FACT.build(key="step_signal", value=kind, source="detected", note=note or NOTES[kind])
        sender.send(FACT.name, d)


def said() -> str:
    return _sent
