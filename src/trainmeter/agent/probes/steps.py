"""Optimizer steps, micro-batches and tokens: the one probe on the training loop's hot path.

How the model's forward is found, cheaply:

- *Discovery*: a global forward pre-hook and an always-called global forward hook keep a depth
  counter; a training-mode call entered at depth 0 is a root call. The first root module with
  parameters (a loss module has none) is the model: its *root*. Global hooks push every
  module of every forward onto torch's slow call path, so they live only until the root is
  found: then they are removed, and the root's class counts its calls (`_CallPatch`: cheaper
  than a hook on the root, which would send every call down torch's slow path).
- Each training-mode call of the root is one micro-batch. Its token tensor (`tokens.find`:
  `input_ids=`, else the first 2-D integer tensor) adds `numel()` tokens; only metadata is read.
- A global optimizer step post-hook commits the pending micro-batches as one step. Several
  optimizers in one iteration (a GAN's generator and discriminator, an actor and a critic) make
  one step: a step begins when an optimizer steps that already stepped in the current one, and
  the others that follow join it (unless those of the current step are gone: an optimizer made
  anew, each epoch say, replaces the old one and begins a step). The same optimizer stepping
  again with no root forward since may mean the model was replaced: discovery starts again (it
  re-adopts the same root in place if nothing changed), and nothing is counted.
- With no `torch.optim.Optimizer` in the process (weights updated by hand,
  `p.data.add_(p.grad, alpha=-lr)`, a functional optimizer, an optimizer class of the user's own),
  each backward pass through the root's output is the step: a pre-hook on the output's `grad_fn`
  (a node of that call's autograd graph, freed with it; nothing is attached to the model). One
  backward call counts once (`step_signal`, which also names the signal in a fact).
- Forwards with gradients off (`torch.no_grad`, `inference_mode`: evaluation) are never
  micro-batches, and never adopt a root.

Under torch.compile every hook is traced by dynamo whenever the call it hooks is compiled (a
module compiled in place with `module.compile()`, a compiled training function), and so is the
root's class `__call__` when the root is called inside a compiled function. Ours must then be
invisible: each returns at once when `torch.compiler.is_dynamo_compiling()` (a constant in the
trace), so they add no graph break, no guard and no recompile, and `fullgraph=True` still holds.
(A non-strict `torch.export` of the root in training mode runs it eagerly: that call counts as a
micro-batch of the next step.)
A root compiled in place is counted from outside its compiled call instead: `nn.Module.compile`
is wrapped so the module's `_compiled_call_impl` goes through `_compiled_pre` first, eagerly
(`compile_support`, which also says why a step compiled with the optimizer is not counted).

Nothing is sent from the hot path: the step hook publishes the running totals in one
`struct.pack_into` into the header of the process's ring (`agent.ring`, shared memory that
outlives the process, so the steps a killed process finished are still there for `tm`). One C
call is one assignment as far as other threads can tell: the sender thread reads the totals
whole (`totals()`, a `Totals`) and turns the difference since its last look into one `step`
record per flush, with no lock. The step count sits last in memory, so even a reader of a
process killed mid-write never sees a step whose tokens are missing.
"""

from __future__ import annotations

import atexit
import os
import struct
import time
import warnings
import weakref
from collections import namedtuple
from collections.abc import Callable

from .. import ring as ring_module
from ..sender import get_sender
from . import compile_support, guard
from . import step_signal as signal
from . import tokens as tok

TYPE_CHECKING = False  # typing costs milliseconds in every Python the run starts
if TYPE_CHECKING:
    from typing import Any

_NO_RESULT = object()
_monotonic = time.monotonic

_depth = 0
_root: Any = None
_rejected: weakref.WeakSet[Any] = weakref.WeakSet()
_first_done = False
_real_on = True
#: The optimizers that stepped in the step in progress: id() -> a weak reference (holding the
#: optimizer would keep its state alive; a dead one was replaced, and is no partner)
_cycle: dict[int, Any] = {}

_any_tokens = False


#: Running totals of this process, published whole by the step hook: steps, tokens (padding
#: included), real (padding excluded, summed over micro-batches whose padding could be read),
#: real_missing (micro-batches whose padding could not be read), micro, and t (monotonic time
#: of the last step). A `collections.namedtuple`: `typing.NamedTuple` would import `typing`.
Totals = namedtuple("Totals", "steps tokens real real_missing micro t")


# The running totals live in the ring's header (shared memory), written by the step hook in one
# `pack_into` and read whole by `totals()`: until there is a ring, a scratch buffer of the same
# layout. The training thread counts in plain ints: each root call adds its micro-batch and
# tokens to `_n_micro`, `_n_tokens` ... at once, and the step hook only advances `_n_steps` and
# publishes, so what is published is always whole steps. `_c_micro` is `_n_micro` at the last
# step: the micro-batches of the step in progress are the difference.
_pack_totals = ring_module.TOTALS.pack_into
_unpack_totals = ring_module.TOTALS.unpack_from
_TOTALS_AT = ring_module.TOTALS_AT
_hdr: Any = bytearray(ring_module.HEADER_BYTES)
_n_steps = _n_tokens = _n_real = _n_missing = _n_micro = 0
_c_micro = 0
_t = 0.0
_sent = Totals(0, 0, 0, 0, 0, 0.0)


def totals() -> Totals:
    """The running totals as the step hook last published them (any thread)."""
    tokens, real, missing, micro, t, steps = _unpack_totals(_hdr, _TOTALS_AT)
    return Totals(steps, tokens, real, missing, micro, t)


def step_count() -> int:
    """Optimizer steps this process committed (the training thread's own count)."""
    return _n_steps


def last_step_t() -> float:
    """`time.monotonic()` when this process committed its last step (0.0 before the first)."""
    return _t


def _mine() -> Totals:
    """The training thread's own counters (private memory, safe after fork), the micro-batches
    of the step in progress included."""
    return Totals(_n_steps, _n_tokens, _n_real, _n_missing, _n_micro, _t)


def pending_micro() -> int:
    """Micro-batches of the step in progress (training thread)."""
    return _n_micro - _c_micro


#: Called once per root module at its first counted forward: f(root, token_tensor, args, kwargs).
first_forward: list[Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], None]] = []
#: Called with the root module when it is adopted, before its first counted forward runs.
adopted: list[Callable[[Any], None]] = []
#: Called after each counted step with the step index; keep empty when nobody listens.
step_listeners: list[Callable[[int], None]] = []
#: Set to a list to receive (args, kwargs, tokens) of the next counted root call, then reset.
capture: list[Any] | None = None

_nn_module: Any = None
#: torch.compiler.is_dynamo_compiling once attached (see `_compiling_check`)
_compiling: Callable[[], bool] = bool
_tensor_cls: Any = None  # torch.Tensor, for the fast path of `_root_call`
#: torch.is_grad_enabled once attached: a forward with gradients off is evaluation
_grad_on: Callable[[], bool] = bool  # bool() is False: nothing counts before attach
_ids_dtype: Any = None  # the dtype of the token tensors seen first and alone
_discovery: list[Any] = []  # handles of the two global forward hooks, while discovering
_root_hook: list[Any] = []  # the root's class patch, and its first call's forward hook
_step_hook: list[Any] = []


def root() -> Any:
    """The module whose training forwards are counted as micro-batches, or None."""
    return _root


def pause(on: bool) -> None:
    """Stop (or resume) discovery while the agent itself runs a module (between steps only)."""
    global _depth
    _depth = 1 << 30 if on else 0


# ---- discovery: global hooks, only until the root is known ------------------------------


def _pre(module: Any, args: Any) -> None:
    global _depth
    if _compiling():
        return  # traced by dynamo: be a no-op in its graph (see the module docstring)
    if _depth == 0 and module.training and _grad_on():
        try:
            if _adopt(module):
                return  # the global hooks are gone: no depth to keep
        except Exception as exc:  # noqa: BLE001 - promise 1
            _fail(exc)
            return
    _depth += 1


def _post(module: Any, args: Any, *rest: Any) -> None:
    global _depth
    if _compiling():
        return
    _depth -= 1
    if _depth < 0:
        _depth = 0


def _adopt(module: Any, hooks: bool = True) -> bool:
    """Make the module of this outermost training-mode call the root, unless it has no
    parameters (a loss module). Adopting before its forward runs keeps torch.compile from
    tracing the global hooks and recompiling once they are gone."""
    global _root, _first_done
    if module is _root and _root_hook:
        # the root again, after a step without its forward: its class counted this call
        # already (`_root_call` runs before torch's hooks)
        _remove(_discovery)
        return True
    if module in _rejected:
        return False
    if next(iter(module.parameters()), None) is None:
        _rejected.add(module)
        return False
    _end_discovery()
    _root, _first_done = module, False
    for listener in tuple(adopted):
        _call(listener, module)
    if not hooks:
        return True  # a root compiled in place: `_compiled_pre` counts its calls
    _root_hook.append(_CallPatch(type(module)))
    # this call began before its class counted calls: count it after its forward, once
    _root_hook.append(module.register_forward_hook(_first_call, with_kwargs=True, always_call=True))
    return True


def _first_call(module: Any, args: Any, kwargs: Any, result: Any = _NO_RESULT) -> None:
    # with always_call, the exception path calls hook(module, args, result): nothing to count
    if _compiling():
        return
    try:
        if len(_root_hook) > 1:
            _root_hook.pop().remove()
        if result is not _NO_RESULT and module.training and module is _root:
            _micro(module, args, kwargs)
            if signal.by_backward:
                signal.watch(result)
    except Exception as exc:  # noqa: BLE001 - promise 1
        _fail(exc)


def _start_discovery() -> None:
    global _depth
    _depth = 0
    _discovery.append(_nn_module.register_module_forward_pre_hook(_pre))
    _discovery.append(_nn_module.register_module_forward_hook(_post, always_call=True))


def _end_discovery() -> None:
    _remove(_discovery)
    _remove(_root_hook)


def _remove(handles: list[Any]) -> None:
    while handles:
        try:
            handles.pop().remove()
        except Exception:  # noqa: BLE001 - promise 1: a hook torch already dropped
            pass


# ---- the hot path: the root's calls and the optimizer's post-hook -----------------------


class _CallPatch:
    """The root's class calls `_root_call` first: the counting of a micro-batch without torch's
    hook machinery. A forward pre-hook on the root would send every call of the model down
    `Module._call_impl`'s general path (about 1 µs a call on this machine, more than all our
    counting); a class attribute costs one Python frame. Only instances of that class pass
    through it, and only the root is counted. `remove()` puts the class back as it was."""

    def __init__(self, cls: type) -> None:
        self.cls = cls
        self.own = cls.__dict__.get("__call__", _NO_RESULT)
        inner = cls.__call__
        inner = getattr(inner, "__trainmeter_original__", inner)
        self.patched = _root_call(inner)
        cls.__call__ = self.patched  # type: ignore[method-assign]

    def remove(self) -> None:
        cls = self.cls
        if cls.__dict__.get("__call__") is not self.patched:
            return  # someone patched it after us: leave theirs
        if self.own is _NO_RESULT:
            delattr(cls, "__call__")
        else:
            cls.__call__ = self.own  # type: ignore[method-assign]


def _root_call(inner: Callable[..., Any]) -> Callable[..., Any]:
    """The class's new `__call__`: count, then call what the class called before. When that is
    torch's own `Module._wrapped_call_impl`, do its two lines here instead of calling it: the
    extra frame and the repacking of the arguments would cost five times the counting."""
    direct = _is_torch_wrapped_call(inner)

    def __call__(module: Any, *args: Any, **kwargs: Any) -> Any:
        global _n_micro, _n_tokens, _n_missing
        # dynamo may trace this (the root called inside a compiled function): it then sees a
        # constant first and reads no global of ours, so it adds no guard and no graph break
        counted = False
        if not _compiling() and module is _root and module.training and _grad_on():
            counted = True
            try:
                # the common call, `model(ids)`: the tokens first and alone, of the dtype seen
                # before (a third of the general path's cost; `_micro` gives the same counts)
                ids = args[0] if args and not kwargs and _first_done and capture is None else None
                if type(ids) is _tensor_cls and ids.dtype is _ids_dtype and ids.dim() == 2:
                    _n_micro += 1
                    _n_tokens += ids.numel()
                    _n_missing += 1  # no keyword arguments: no mask to read padding from
                else:
                    _micro(module, args, kwargs)
            except Exception as exc:  # noqa: BLE001 - promise 1
                _fail(exc)
        if direct:
            compiled = module._compiled_call_impl
            out = (
                compiled(*args, **kwargs)
                if compiled is not None
                else module._call_impl(*args, **kwargs)
            )
        else:
            out = inner(module, *args, **kwargs)
        if counted and signal.by_backward:
            signal.watch(out)
        return out

    __call__.__trainmeter_original__ = inner  # type: ignore[attr-defined]
    return __call__


def _is_torch_wrapped_call(function: Any) -> bool:
    """Whether `function` is torch's `Module._wrapped_call_impl` as `_root_call` knows it: use
    `_compiled_call_impl` when set, else `_call_impl`. Another torch, another body: call it."""
    if _nn_module is None or function is not getattr(_nn_module.Module, "_wrapped_call_impl", None):
        return False
    code = getattr(function, "__code__", None)
    return getattr(code, "co_names", None) == ("_compiled_call_impl", "_call_impl")


def _compiled_pre(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Eagerly, before a module compiled in place runs its compiled call: what `_pre` and
    `_root_call` would do, had dynamo not traced them."""
    if not module.training or _compiling() or not _grad_on():
        return
    try:
        if module is _root:
            if _discovery:
                _remove(_discovery)  # the root again after a step without its forward
            if not _root_hook:  # else its class counted this call already (`_root_call`)
                _micro(module, args, kwargs)
        elif _discovery and _depth == 0 and _adopt(module, hooks=False):
            _micro(module, args, kwargs)
    except Exception as exc:  # noqa: BLE001 - promise 1
        _fail(exc)


def _micro(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    global _n_micro, _n_tokens, _n_real, _n_missing, _any_tokens, _first_done, capture
    global _ids_dtype
    _n_micro += 1
    tokens = tok.find(args, kwargs)
    if tokens is not None:
        _n_tokens += tokens.numel()
        if not _any_tokens:
            _any_tokens = True
            _mark_tokens()
        if tokens is (args[0] if args else None):
            _ids_dtype = tokens.dtype  # the fast path of `_root_call` looks for this one
        real = _real(tokens, kwargs) if _real_on and kwargs else None
        if real is None:
            _n_missing += 1
        else:
            _n_real += real
    if capture is not None:
        capture.append((args, kwargs, tokens))
        capture = None
    if not _first_done:
        _first_done = True
        for listener in tuple(first_forward):
            _call(listener, module, tokens, args, kwargs)


def _call(listener: Callable[..., None], *args: Any) -> None:
    """Run another probe's callback; if it raises, that probe goes off, not this one."""
    try:
        listener(*args)
    except Exception as exc:  # noqa: BLE001 - promise 1
        for group in (first_forward, step_listeners, adopted):
            if listener in group:
                group.remove(listener)
        guard.off(getattr(listener, "probe", listener.__module__.rpartition(".")[2]), exc)


def _real(tokens: Any, kwargs: dict[str, Any]) -> int | None:
    global _real_on
    try:
        return tok.real(tokens, kwargs)
    except Exception as exc:  # noqa: BLE001 - counting padding is optional: stop only that
        _real_on = False
        guard.off("real tokens", exc)
        return None


# ---- when no optimizer marks the step (see `step_signal`) ---------------------------------


def _backward_step() -> None:
    """A backward pass through the root's output, with no optimizer in the process."""
    if _n_micro != _c_micro:
        signal.say("backward")
        _commit()


def _at_exit() -> None:
    """The process ends with training forwards seen and no step: say why steps are absent."""
    if _n_steps or _root is None or _n_micro == 0 or signal.said():
        return
    signal.say(
        "none",
        f"training-mode forwards of {type(_root).__name__} with gradients on were seen, but no "
        "optimizer step and no backward pass through its output: no step can be counted",
    )


def _commit() -> None:
    """The micro-batches since the last step are one more step: publish the totals."""
    global _n_steps, _c_micro, _t
    _c_micro = _n_micro
    _n_steps += 1
    # the one publication: a single C call, steps last in memory (see agent.ring)
    _t = _monotonic()
    _pack_totals(_hdr, _TOTALS_AT, _n_tokens, _n_real, _n_missing, _n_micro, _t, _n_steps)
    if step_listeners:
        for listener in tuple(step_listeners):
            _call(listener, _n_steps)


def _weak(optimizer: Any) -> Any:
    try:
        return weakref.ref(optimizer)
    except TypeError:  # an optimizer class without weak references: taken as alive
        return lambda: True


def _after_step(optimizer: Any, args: Any, kwargs: Any) -> None:
    if _compiling():
        # a compiled optimizer step: this hook is being traced, and counting here would need a
        # graph break. Say so once, at compile time, instead of counting nothing silently
        compile_support.note_compiled_step()
        return
    try:
        signal.optimizer_made()  # an optimizer that steps (even one made before we attached)
        key = id(optimizer)
        if key not in _cycle and any(ref() is not None for ref in _cycle.values()):
            _cycle[key] = _weak(optimizer)  # another optimizer of the same iteration
            return
        if _n_micro == _c_micro and _root is not None:
            # the same optimizer again with no forward of the root since its last step: not a
            # new step. The model may have been replaced: look for the root again
            if not _discovery:
                _start_discovery()
            return
        _cycle.clear()
        _cycle[key] = _weak(optimizer)
        signal.say("optimizer")
        _commit()
    except Exception as exc:  # noqa: BLE001 - promise 1
        _fail(exc)


# ---- the sender side ---------------------------------------------------------------------


def drain() -> None:
    """Sender thread: one `step` record for the steps committed since the last call."""
    global _sent
    c, s = totals(), _sent
    if c.steps == s.steps:
        return
    sender = get_sender()
    if sender is None:
        return
    d: dict[str, Any] = {"k": c.steps - s.steps, "n": c.steps, "micro": c.micro - s.micro}
    if _any_tokens:
        d["tokens"] = c.tokens - s.tokens
        if c.real_missing == s.real_missing and c.micro > s.micro:
            d["real_tokens"] = c.real - s.real
    sender.send("step", d, t=c.t)
    _sent = c


def _mark_tokens() -> None:
    _hdr[ring_module.H_ANY_TOKENS * 8] = 1  # the low byte of a little-endian int64


def _bind(ring: Any) -> None:
    """A new ring (at attach, or in a forked child): publish the totals there from now on. What
    this process inherited at fork is its base, so `tm` counts only this process's steps."""
    global _hdr
    c = totals()  # whole steps: the step in progress is not the base's
    base = struct.Struct(f"<{ring_module.H_BASE_MICRO - ring_module.H_BASE_STEPS + 1}q")
    base.pack_into(
        ring.mm, ring_module.H_BASE_STEPS * 8, c.steps, c.tokens, c.real, c.real_missing, c.micro
    )
    _pack_totals(ring.mm, _TOTALS_AT, c.tokens, c.real, c.real_missing, c.micro, c.t, c.steps)
    _hdr = ring.mm
    if _any_tokens:
        _mark_tokens()


def _fail(exc: BaseException) -> None:
    detach()
    guard.off("steps", exc)
    guard.off("tokens", "the steps probe it rides on is off")


def _forget_after_fork() -> None:
    """A forked child (a DataLoader worker) must not resend its parent's unsent steps."""
    global _sent, _c_micro, _hdr
    # the parent's step in progress is not the child's: its micro-batches so far become part
    # of what the child inherited, and the child's totals start from there
    _c_micro = _n_micro
    ring = ring_module.active
    if ring is None or _hdr is not ring.mm:  # never write into the parent's ring
        c = _mine()
        _hdr = bytearray(ring_module.HEADER_BYTES)
        _pack_totals(_hdr, _TOTALS_AT, c.tokens, c.real, c.real_missing, c.micro, c.t, c.steps)
    _sent = _mine()


#: kept for the benchmarks, which set up `_compiling` as attach() does
_compiling_check = compile_support.compiling_check


def attach(torch: Any) -> list[str]:
    """Start discovery and hook every optimizer; return the probe names that attached."""
    global _nn_module, _compiling, _tensor_cls, _grad_on
    from torch.nn.modules import module as nn_module
    from torch.optim import optimizer as optim_module

    tok.bind(torch)
    _nn_module = nn_module
    # torch warns that global hooks fire once more for a torch.compile wrapper; the depth
    # counter already handles that, and the warning would be ours, not the user's
    warnings.filterwarnings(
        "ignore", message=r"Using `torch.compile\(module\)` when there are global hooks"
    )
    _compiling = _compiling_check(torch)
    _tensor_cls = torch.Tensor
    _grad_on = torch.is_grad_enabled
    signal.bind(torch, _compiling, _backward_step, _fail)
    compile_support.install(torch, _compiled_pre, _fail)
    _start_discovery()
    _step_hook.append(optim_module.register_optimizer_step_post_hook(_after_step))
    sender = get_sender()
    if sender is not None:
        sender.add_drain(drain)
        ring_module.on_new.append(_bind)
        ring = ring_module.current()
        if ring is not None:
            _bind(ring)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_forget_after_fork)
    atexit.register(_at_exit)  # after the sender's: runs first, before its last flush
    return ["steps", "tokens"]


def detach() -> None:
    """Remove every hook (a failed probe, or a test)."""
    _end_discovery()
    _remove(_step_hook)
