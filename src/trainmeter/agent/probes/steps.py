"""Optimizer steps, micro-batches and tokens: the one probe on the training loop's hot path.

How the model's forward is found, cheaply:

- *Discovery*: a global forward pre-hook and an always-called global forward hook keep a depth
  counter; a training-mode call entered at depth 0 is a root call. The first root module with
  parameters (a loss module has none) is the model: its *root*. Global hooks push every
  module of every forward onto torch's slow call path, so they live only until the root is
  found: then they are removed and one forward pre-hook (with kwargs) goes on the root alone.
- Each training-mode call of the root is one micro-batch. Its token tensor (`tokens.find`:
  `input_ids=`, else the first 2-D integer tensor) adds `numel()` tokens; only metadata is read.
- A global optimizer step post-hook commits the pending micro-batches as one step. A step with
  no root forward since the last one (several optimizers, a repeated call) is the same step and
  is not counted again; when the same optimizer does that, the model may have been replaced, so
  discovery starts again (it re-adopts the same root in place if nothing changed).

Under torch.compile every hook is traced by dynamo whenever the call it hooks is compiled (a
module compiled in place with `module.compile()`, a compiled training function). Our hooks must
then be invisible: each returns at once when `torch.compiler.is_compiling()` (a constant in the
trace), so they add no graph break, no guard and no recompile, and `fullgraph=True` still holds.
A root compiled in place is counted from outside its compiled call instead: `nn.Module.compile`
is wrapped so the module's `_compiled_call_impl` goes through `_compiled_pre` first, eagerly.

Nothing is sent from the hot path: the step hook publishes the running totals in one
`struct.pack_into` into the header of the process's ring (`agent.ring`, shared memory that
outlives the process, so the steps a killed process finished are still there for `tm`). One C
call is one assignment as far as other threads can tell: the sender thread reads the totals
whole (`totals()`, a `Totals`) and turns the difference since its last look into one `step`
record per flush, with no lock. The step count sits last in memory, so even a reader of a
process killed mid-write never sees a step whose tokens are missing.
"""

from __future__ import annotations

import functools
import os
import struct
import sys
import time
import warnings
import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

from .. import importhook
from .. import ring as ring_module
from ..sender import get_sender
from ..state import STATE
from . import guard
from . import tokens as tok

_NO_RESULT = object()
_monotonic = time.monotonic

_depth = 0
_root: Any = None
_rejected: weakref.WeakSet[Any] = weakref.WeakSet()
_first_done = False
_real_on = True
_last_optimizer = 0  # id() only: holding the optimizer would keep its state alive

# pending micro-batches of the step in progress (training thread only)
_p_micro = 0
_p_tokens = 0
_p_real = 0
_p_real_missing = 0
_any_tokens = False


class Totals(NamedTuple):
    """Running totals of this process, published whole by the step hook."""

    steps: int
    tokens: int  # padding included
    real: int  # padding excluded, summed over micro-batches whose padding could be read
    real_missing: int  # micro-batches whose padding could not be read
    micro: int
    t: float  # monotonic time of the last step


# The running totals live in the ring's header (shared memory), written by the step hook in one
# `pack_into` and read whole by `totals()`: until there is a ring, a scratch buffer of the same
# layout. The training thread keeps its own copy in plain ints (`_n_steps` ...) to add to.
_pack_totals = ring_module.TOTALS.pack_into
_unpack_totals = ring_module.TOTALS.unpack_from
_TOTALS_AT = ring_module.TOTALS_AT
_hdr: Any = bytearray(ring_module.HEADER_BYTES)
_n_steps = _n_tokens = _n_real = _n_missing = _n_micro = 0
_t = 0.0
_sent = Totals(0, 0, 0, 0, 0, 0.0)


def totals() -> Totals:
    """The running totals as the step hook last published them (any thread)."""
    tokens, real, missing, micro, t, steps = _unpack_totals(_hdr, _TOTALS_AT)
    return Totals(steps, tokens, real, missing, micro, t)


def _mine() -> Totals:
    """The totals from the training thread's own copy (private memory, safe after fork)."""
    return Totals(_n_steps, _n_tokens, _n_real, _n_missing, _n_micro, _t)


#: Called once per root module at its first counted forward: f(root, token_tensor, args, kwargs).
first_forward: list[Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], None]] = []
#: Called after each counted step with the step index; keep empty when nobody listens.
step_listeners: list[Callable[[int], None]] = []
#: Set to a list to receive (args, kwargs, tokens) of the next counted root call, then reset.
capture: list[Any] | None = None

_nn_module: Any = None
_compiling: Callable[[], bool] = bool  # torch.compiler.is_compiling once attached
_comptime: Any = None  # torch._dynamo.comptime.comptime: runs a function at compile time
_discovery: list[Any] = []  # handles of the two global forward hooks, while discovering
_root_hook: list[Any] = []  # handles of the root's own hooks
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
    if _depth == 0 and module.training:
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
        # the root again, after a step without its forward: its own pre-hook is in this call's
        # hook list and counts it; removing that hook now would make torch call it without
        # its keyword arguments
        _remove(_discovery)
        return True
    if module in _rejected:
        return False
    if next(iter(module.parameters()), None) is None:
        _rejected.add(module)
        return False
    _end_discovery()
    _root, _first_done = module, False
    if not hooks:
        return True  # a root compiled in place: `_compiled_pre` counts its calls
    _root_hook.append(module.register_forward_pre_hook(_root_pre, with_kwargs=True))
    # this call's pre-hooks were already listed: count it after its forward, once
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


# ---- the hot path: the root's pre-hook and the optimizer's post-hook --------------------


def _root_pre(module: Any, args: Any, kwargs: Any = None) -> None:
    # kwargs defaults: torch calls a pre-hook without them if its handle went away mid-call
    if _compiling():
        return
    if module.training and module is _root:
        try:
            _micro(module, args, kwargs or {})
        except Exception as exc:  # noqa: BLE001 - promise 1
            _fail(exc)


def _compiled_pre(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Eagerly, before a module compiled in place runs its compiled call: what `_pre` and
    `_root_pre` would do, had dynamo not traced them."""
    if not module.training or _compiling():
        return
    try:
        if module is _root:
            if _discovery:
                _remove(_discovery)  # the root again after a step without its forward
            _micro(module, args, kwargs)
        elif _discovery and _depth == 0 and _adopt(module, hooks=False):
            _micro(module, args, kwargs)
    except Exception as exc:  # noqa: BLE001 - promise 1
        _fail(exc)


def _shim(module: Any, compiled_call: Any) -> Any:
    ref = weakref.ref(module)  # the module holds the shim: no cycle through it

    def call(*args: Any, **kwargs: Any) -> Any:
        owner = ref()
        if owner is not None:
            _compiled_pre(owner, args, kwargs)
        return compiled_call(*args, **kwargs)

    call.__trainmeter_original__ = compiled_call  # type: ignore[attr-defined]
    return call


def _wrap_compile(original: Any) -> Any:
    @functools.wraps(original)
    def compile(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        try:
            compiled_call = self.__dict__.get("_compiled_call_impl")
            if compiled_call is not None and not hasattr(compiled_call, "__trainmeter_original__"):
                self._compiled_call_impl = _shim(self, compiled_call)
        except Exception as exc:  # noqa: BLE001 - promise 1
            _fail(exc)
        return result

    compile.__trainmeter_original__ = original  # type: ignore[attr-defined]
    return compile


def _micro(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    global _p_micro, _p_tokens, _p_real, _p_real_missing, _any_tokens, _first_done, capture
    _p_micro += 1
    tokens = tok.find(args, kwargs)
    if tokens is not None:
        _p_tokens += tokens.numel()
        if not _any_tokens:
            _any_tokens = True
            _mark_tokens()
        real = _real(tokens, kwargs) if _real_on and kwargs else None
        if real is None:
            _p_real_missing += 1
        else:
            _p_real += real
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
        for group in (first_forward, step_listeners):
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


def _after_step(optimizer: Any, args: Any, kwargs: Any) -> None:
    global _n_steps, _n_tokens, _n_real, _n_missing, _n_micro, _t, _last_optimizer
    global _p_micro, _p_tokens, _p_real, _p_real_missing
    if _compiling():
        # a compiled optimizer step: this hook is being traced, and counting here would need a
        # graph break. Say so once, at compile time, instead of counting nothing silently
        if _comptime is not None:
            _comptime(_compiled_step)
        return
    try:
        previous, _last_optimizer = _last_optimizer, id(optimizer)
        if not _p_micro and _root is not None:
            # no forward of the root since the last step: the same step again (a second
            # optimizer, a repeated call), not counted twice. The same optimizer stepping
            # twice may also mean the model was replaced: look for the root again
            if _last_optimizer == previous and not _discovery:
                _start_discovery()
            return
        _n_steps += 1
        _n_tokens += _p_tokens
        _n_real += _p_real
        _n_missing += _p_real_missing
        _n_micro += _p_micro
        _p_micro = _p_tokens = _p_real = _p_real_missing = 0
        # the one publication: a single C call, steps last in memory (see agent.ring)
        _t = _monotonic()
        _pack_totals(_hdr, _TOTALS_AT, _n_tokens, _n_real, _n_missing, _n_micro, _t, _n_steps)
        n = _n_steps
        STATE.step = n
        if step_listeners:
            for listener in tuple(step_listeners):
                _call(listener, n)
    except Exception as exc:  # noqa: BLE001 - promise 1
        _fail(exc)


def _bind_comptime(dynamo: Any) -> None:
    global _comptime
    module = sys.modules.get("torch._dynamo.comptime")
    _comptime = getattr(module, "comptime", None)


def _compiled_step(ctx: Any = None) -> None:
    """Run by dynamo at compile time (`comptime`), never in the compiled step itself."""
    reason = (
        "optimizer.step() runs inside torch.compile, where the step hook cannot run without a "
        "graph break: optimizer steps and tokens are not counted"
    )
    guard.off("steps", reason)
    guard.off("tokens", "the steps probe it rides on is off")


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
    c = _mine()
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
    global _sent, _p_micro, _p_tokens, _p_real, _p_real_missing, _hdr
    ring = ring_module._ring
    if ring is None or _hdr is not ring.mm:  # never write into the parent's ring
        c = _mine()
        _hdr = bytearray(ring_module.HEADER_BYTES)
        _pack_totals(_hdr, _TOTALS_AT, c.tokens, c.real, c.real_missing, c.micro, c.t, c.steps)
    _sent = _mine()
    _p_micro = _p_tokens = _p_real = _p_real_missing = 0


def attach(torch: Any) -> list[str]:
    """Start discovery and hook every optimizer; return the probe names that attached."""
    global _nn_module, _compiling
    from torch.nn.modules import module as nn_module
    from torch.optim import optimizer as optim_module

    tok.bind(torch)
    _nn_module = nn_module
    # torch warns that global hooks fire once more for a torch.compile wrapper; the depth
    # counter already handles that, and the warning would be ours, not the user's
    warnings.filterwarnings(
        "ignore", message=r"Using `torch.compile\(module\)` when there are global hooks"
    )
    compiler = getattr(torch, "compiler", None)
    _compiling = getattr(compiler, "is_compiling", None) or bool
    # dynamo is imported only when the user compiles: take its `comptime` then, not before
    importhook.when_imported("torch._dynamo", _bind_comptime)
    module_cls = torch.nn.Module
    compile_method = getattr(module_cls, "compile", None)
    if compile_method is not None and not hasattr(compile_method, "__trainmeter_original__"):
        module_cls.compile = _wrap_compile(compile_method)
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
    return ["steps", "tokens"]


def detach() -> None:
    """Remove every hook (a failed probe, or a test)."""
    _end_discovery()
    _remove(_step_hook)
