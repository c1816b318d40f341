"""Which of the model's direct children are part of what it trains: a frozen child that never
runs with gradients on in the first training forward is not.

Why: some loops call a module that holds more than the model. timm's training *task* holds the
model, the loss and an EMA copy of the model, and the loop calls `task(input, target)`; a
distillation task holds a frozen teacher it runs under `torch.no_grad()`. Counting the whole
called module doubles N (the EMA copy) or adds a network that is never trained (the teacher),
and L with it. Whether a child takes part can only be seen in a forward, so each frozen child
with parameters (every one `requires_grad=False`) gets a pre-hook until the first training
forward has run; a child with trainable weights is always part of the model. A frozen child
run with gradients on (a LoRA base layer, a frozen embedding) stays: its weights are in the
computation that trains. Most models have no frozen direct child, and get no hook at all.

When what is left is a single child holding all of the kept parameters (the wrapper has none
of its own), that child is the model: its config and class name are read, as for a wrapper.
Standard library only; only `requires_grad` flags, module identities and the grad mode are read.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_watched: list[Any] = []  # the frozen children under watch
_ran: set[int] = set()  # ids of those run with gradients on
_hooks: list[Any] = []
_left_out: list[Any] = []  # frozen children that did not run: not part of the model
_inner: dict[int, Any] = {}  # id(wrapper) -> the one child that is the model


def _frozen(module: Any) -> bool:
    """Has parameters, and none of them trains."""
    any_param = False
    for p in module.parameters():
        if p.requires_grad:
            return False
        any_param = True
    return any_param


def watch(inner: Any, grad_on: Callable[[], bool], compiling: Callable[[], bool]) -> None:
    """Before the root's first forward: hook each frozen direct child of `inner` (the model
    with its wrappers looked through) to see whether it runs with gradients on."""
    reset()

    def ran(module: Any, args: Any) -> None:
        if not compiling() and grad_on():
            _ran.add(id(module))

    for child in inner.children():
        if _frozen(child):
            _watched.append(child)
            _hooks.append(child.register_forward_pre_hook(ran))


def settle(inner: Any) -> list[Any]:
    """After the first training forward: the children left out (none, for most models). Takes
    the hooks off; says which one child is the model when one holds all that is kept."""
    while _hooks:
        _hooks.pop().remove()
    _left_out[:] = [c for c in _watched if id(c) not in _ran]
    _watched.clear()
    if not _left_out:
        return []
    out = {id(c) for c in _left_out}
    kept = [
        c
        for c in inner.children()
        if id(c) not in out and next(iter(c.parameters()), None) is not None
    ]
    own = next(iter(inner.parameters(recurse=False)), None)
    if len(kept) == 1 and own is None:
        _inner[id(inner)] = kept[0]
    return list(_left_out)


def inner_of(module: Any) -> Any:
    """The child that is the model, when `module` is a wrapper found to hold one; else None."""
    return _inner.get(id(module))


def left_out() -> list[Any]:
    """The children found not to be part of the model (settled at the first forward)."""
    return _left_out


def reset() -> None:
    """A new root: forget the last one's parts."""
    while _hooks:
        _hooks.pop().remove()
    _watched.clear()
    _ran.clear()
    _left_out.clear()
    _inner.clear()
