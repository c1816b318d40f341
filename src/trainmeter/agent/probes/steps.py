"""Optimizer steps, micro-batches and tokens: the one probe on the training loop's hot path.

The probe is three modules with one job each, sharing one state object (`step_state.state`):
this one counts (the root's calls, the optimizer's post-hook) and attaches; `root_finder` finds
the model; `step_totals` keeps the running totals and publishes them in the ring.

- *Discovery* (`root_finder`): the first outermost training-mode call of a module with
  parameters finds the model, its *root*; then the root's class counts its calls
  (`_CallPatch`: cheaper than a hook on the root, which would send every call down torch's
  slow path). A counted call with nothing hooking the module calls its forward itself, as
  torch's `_call_impl` would, without that function's own cost (`_torch_call_impl`).
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
is wrapped so the module's `_compiled_call_impl` goes through `root_finder.compiled_pre` first, eagerly
(`compile_support`, which also says why a step compiled with the optimizer is not counted).

Nothing is sent from the hot path: a step publishes the running totals into the ring's header
in one C call (`step_totals.commit`), and the sender thread turns them into `step` records.
"""

from __future__ import annotations

import atexit
import os
import sys
import warnings
import weakref

from .. import ring as ring_module
from ..sender import get_sender
from . import compile_support, first_iteration, guard, root_finder, step_totals
from . import step_signal as signal
from . import tokens as tok
from .root_finder import pause, root
from .step_state import adopted, call, first_forward, state, step_listeners
from .step_totals import Totals, drain, last_step_t, pending_micro, step_count, totals

TYPE_CHECKING = False  # typing costs milliseconds in every Python the run starts
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = [
    "Totals",
    "adopted",
    "attach",
    "capture_next",
    "compiling",
    "detach",
    "drain",
    "first_forward",
    "last_step_t",
    "pause",
    "pending_micro",
    "root",
    "step_count",
    "step_listeners",
    "totals",
]

_NO_RESULT = object()
_commit = step_totals.commit
# what `step_totals.commit` calls: `_after_step` writes it out
_monotonic, _pack_totals = step_totals._monotonic, step_totals._pack_totals
_pack_step, _TOTALS_AT, _STEP_AT = step_totals._pack_step, step_totals._TOTALS_AT, step_totals._STEP_AT


def capture_next(box: list[Any]) -> None:
    """Append (args, kwargs, tokens) of the next counted root call to `box`, once."""
    state.capture = box
    state.fast = False  # the next call takes `_micro`, which captures


def compiling() -> bool:
    """Whether dynamo is tracing right now (False before attach)."""
    return state.compiling()


# ---- the hot path: the root's calls and the optimizer's post-hook -----------------------


class _CallPatch:
    """The root's class calls `_root_call` first: the counting of a micro-batch without torch's
    hook machinery. A forward pre-hook on the root would send every call of the model down
    `Module._call_impl`'s general path (about 1 µs a call on this machine, more than all our
    counting); a class attribute costs one Python frame, in place of torch's
    `_wrapped_call_impl` (and of its `_call_impl` where nothing hooks the call). Only instances
    of that class pass through it, and only the root is counted. `remove()` puts the class back
    as it was."""

    def __init__(self, cls: type) -> None:
        self.cls = cls
        self.own = cls.__dict__.get("__call__", _NO_RESULT)
        inner = cls.__call__
        inner = getattr(inner, "__trainmeter_original__", inner)
        impl = _torch_call_impl()
        if getattr(cls, "_slow_forward", None) is not _module_attr("_slow_forward"):
            impl = None  # the class traces its own way: torch's path for every call
        self.patched = _root_call(inner, impl)
        cls.__call__ = self.patched  # type: ignore[method-assign]

    def remove(self) -> None:
        cls = self.cls
        if cls.__dict__.get("__call__") is not self.patched:
            return  # someone patched it after us: leave theirs
        if self.own is _NO_RESULT:
            delattr(cls, "__call__")
        else:
            cls.__call__ = self.own  # type: ignore[method-assign]


def _root_call(inner: Callable[..., Any], impl: Any = None) -> Callable[..., Any]:
    """The class's new `__call__`: count, then call what the class called before. When that is
    torch's own `Module._wrapped_call_impl`, do its two lines here instead of calling it: the
    extra frame and the repacking of the arguments would cost five times the counting. And
    when `impl` is torch's `Module._call_impl` as `_torch_call_impl` knows it, a counted call
    with nothing hooked calls the forward itself, as that function would."""
    direct = _is_torch_wrapped_call(inner)
    # closure cells: cheaper to reach than globals. What attach bound of torch is read once
    # here (the root is adopted after attach), the state's fields at each call
    s = state
    compiling, grad_on, tensor_cls = s.compiling, s.grad_on, s.tensor_cls
    watching, weak = first_iteration.watching, weakref.ref
    plain = direct and impl is not None
    nn, trace = s.nn_module, s.jit_trace

    def __call__(module: Any, *args: Any, **kwargs: Any) -> Any:
        # dynamo may trace this (the root called inside a compiled function): it then sees a
        # constant first and reads nothing else of ours, so it adds no guard and no graph break
        # (the root's training flag read from its `__dict__`: `module.training` would go
        # through nn.Module's `__getattr__` hook and three type lookups)
        if not compiling() and module is s.root and s.root_vars["training"] and grad_on():
            try:
                # the common call, `model(ids)` or `model(x)`: one tensor alone (each attribute
                # of a tensor read here is a C getter of torch's, as dear as a Python call: each
                # is read once, and only when the rule needs it)
                ids = args[0] if args and not kwargs and s.fast else None
                if type(ids) is not tensor_cls:
                    _micro(module, args, kwargs)
                elif ids is s.last_ids and (version := ids._version) == s.ids_ver:
                    # the last token batch again (kept from step to step), its size read at this
                    # version: the same batch in this step, or refilled in place. Its dtype is
                    # not read again: nothing but `x.data = y` changes a tensor's dtype or size
                    # without a new version, and that is not seen here (nor was its size)
                    if version == s.last_ver:
                        s.n_calls += 1  # the same batch again in this step: not new data
                    else:
                        s.last_ver = version
                        s.n_micro += 1
                        s.n_tokens += s.ids_numel
                        s.n_missing += 1  # no keyword arguments: no mask to read padding
                elif (
                    (last := s.last_in) is not None
                    and last() is ids
                    and len(args) == 1
                    and not watching
                    and not ids.requires_grad
                ):
                    # the last batch of `model(x)` again (see the branch of new ones below):
                    # kept from step to step, its dtype known (as above)
                    version = ids._version
                    if version == s.last_ver:
                        s.n_calls += 1  # the same batch again in this step: not new data
                    else:
                        if s.last_ver >= 0:  # not the step's first batch: the last one's shape
                            _shape_seen(s.last_shape)  # joins the step's (see `_shapes`)
                        if version != s.shape_ver:  # refilled: read its shape again
                            s.last_shape = ids.shape
                            s.shape_ver = version
                        s.last_ver = version
                        s.n_micro += 1
                elif (dtype := ids.dtype) is s.ids_dtype:
                    # token ids of the dtype seen before, not the kept batch at its size's
                    # version (a third of the general path's cost; `_micro` gives the same
                    # counts)
                    if ids is not s.last_ids:  # (else its version was read above)
                        version = ids._version
                    if ids.dim() == 2:
                        if ids is s.last_ids and version == s.last_ver:
                            s.n_calls += 1  # (`_micro` fed it in this step)
                        elif version == s.last_ver and _same_data(ids):
                            s.n_calls += 1  # the step's batch again, through a new view
                        else:
                            s.last_ids, s.ids_ver, s.ids_numel = ids, version, ids.numel()
                            s.last_in = s.last_shape = None
                            s.last_ver = version
                            s.n_micro += 1
                            s.n_tokens += s.ids_numel
                            s.n_missing += 1
                    else:
                        _micro(module, args, kwargs)
                elif (
                    dtype is s.plain_dtype
                    and len(args) == 1
                    and not watching
                    and not ids.requires_grad  # so no grad_fn either: a leaf
                ):
                    # `model(x)`, one tensor of a dtype no token tensor has, a leaf that needs
                    # no gradient, not the kept batch: `_micro`'s rule without its search for
                    # tokens
                    version = ids._version
                    if version == s.last_ver and _same_data(ids):
                        s.n_calls += 1  # the step's batch again, through a new view
                    else:
                        if s.last_ver >= 0:  # not the step's first batch: the last one's shape
                            _shape_seen(s.last_shape)  # joins the step's (see `_shapes`)
                        s.last_in = weak(ids)
                        s.last_shape = ids.shape  # a torch.Size: equal to its tuple
                        s.shape_ver = s.last_ver = version
                        s.last_ids = None
                        # a view (`x[:, :F]`): its base, weakly, to know it again once it died
                        base = ids._base
                        s.last_view = (
                            None if base is None
                            else (weak(base), ids.data_ptr(), ids.stride(), dtype)
                        )
                        s.n_micro += 1
                else:
                    _micro(module, args, kwargs)
            except Exception as exc:  # noqa: BLE001 - promise 1
                _fail(exc)
            # a counted call: the forward, then its output watched when a backward is the step
            # (no flag carried to one shared ending: that cost the steady call a twentieth)
            if direct:
                compiled = module._compiled_call_impl
                if compiled is not None:
                    out = compiled(*args, **kwargs)
                elif (
                    plain
                    and type(module)._call_impl is impl  # not replaced on the class since
                    and trace._trace_module_map is None  # no TorchScript trace naming scopes
                    and not (
                        # the eight dictionaries `_call_impl` tests: the root's (read in its
                        # `__dict__`, as its training flag), then the global ones
                        (hooks := s.root_vars)["_forward_pre_hooks"]
                        or hooks["_forward_hooks"]
                        or hooks["_backward_pre_hooks"]
                        or hooks["_backward_hooks"]
                        or nn._global_forward_pre_hooks
                        or nn._global_forward_hooks
                        or nn._global_backward_pre_hooks
                        or nn._global_backward_hooks
                    )
                ):
                    # nothing hooks this call: what `_call_impl` would do, without its frame,
                    # its six closure cells and its pybind11 call (~6,800 instructions, where
                    # this test costs ~1,900)
                    out = module.forward(*args, **kwargs) if kwargs else module.forward(*args)
                elif kwargs:
                    out = module._call_impl(*args, **kwargs)
                else:  # no empty dict merged into another for `**kwargs`: the same call
                    out = module._call_impl(*args)
            else:
                out = inner(module, *args, **kwargs)
            if signal.by_backward:
                signal.watch(out)
            return out
        # not counted (another instance of the class, eval, no_grad, a trace): the same forward
        if direct:
            compiled = module._compiled_call_impl
            return (
                compiled(*args, **kwargs)
                if compiled is not None
                else module._call_impl(*args, **kwargs)
            )
        return inner(module, *args, **kwargs)

    __call__.__trainmeter_original__ = inner  # type: ignore[attr-defined]
    return __call__


def _is_torch_wrapped_call(function: Any) -> bool:
    """Whether `function` is torch's `Module._wrapped_call_impl` as `_root_call` knows it: use
    `_compiled_call_impl` when set, else `_call_impl`. Another torch, another body: call it."""
    nn_module = state.nn_module
    if nn_module is None or function is not getattr(nn_module.Module, "_wrapped_call_impl", None):
        return False
    code = getattr(function, "__code__", None)
    return getattr(code, "co_names", None) == ("_compiled_call_impl", "_call_impl")


#: The names `Module._call_impl` reads before its call of the forward when nothing hooks the
#: module: the tracing state, the two forwards, the module's four hook dictionaries and the four
#: global ones (torch 2.x)
_CALL_IMPL_FAST_NAMES = (
    "torch",
    "_C",
    "_get_tracing_state",
    "_slow_forward",
    "forward",
    "_backward_hooks",
    "_backward_pre_hooks",
    "_forward_hooks",
    "_forward_pre_hooks",
    "_global_backward_pre_hooks",
    "_global_backward_hooks",
    "_global_forward_hooks",
    "_global_forward_pre_hooks",
)


def _torch_call_impl() -> Any:
    """torch's `Module._call_impl` when its body is the one `_root_call` knows, else None.

    With no forward or backward hook on the module and no global one, `_call_impl` calls
    `self._slow_forward` while TorchScript traces, else `self.forward`, and does nothing else;
    and `_slow_forward` calls `self.forward` alone unless `torch.jit._trace._trace_module_map`
    is set (by `torch.jit.trace` and the TorchScript ONNX export, to name the modules' scopes).
    So with that map unset and no hook, `module.forward(*args)` is the very call `_call_impl`
    would make, without its frame, its closure cells and its `torch._C._get_tracing_state()`
    (a pybind11 call): most of what torch's dispatch of a module call costs. `_root_call`
    tests that at every counted call, so a hook registered (or removed) at any time, DDP's or
    FSDP's hooks, a trace, an export or a `_call_impl` replaced on the class (dynamo's
    `disable` of a class) take torch's own path from that call on. Another torch, another
    body: None, and every call takes torch's path."""
    nn_module, trace = state.nn_module, state.jit_trace
    if nn_module is None or trace is None or not hasattr(trace, "_trace_module_map"):
        return None
    impl, slow = _module_attr("_call_impl"), _module_attr("_slow_forward")
    names = getattr(getattr(impl, "__code__", None), "co_names", ())
    slow_names = getattr(getattr(slow, "__code__", None), "co_names", ())
    if names[: len(_CALL_IMPL_FAST_NAMES)] != _CALL_IMPL_FAST_NAMES:
        return None
    if "_trace_module_map" not in slow_names or "_get_tracing_state" not in slow_names:
        return None
    if not all(hasattr(nn_module, name) for name in _CALL_IMPL_FAST_NAMES[9:]):
        return None
    return impl


def _module_attr(name: str) -> Any:
    """`torch.nn.Module`'s own attribute `name` (its class `__dict__`), or None."""
    nn_module = state.nn_module
    return None if nn_module is None else nn_module.Module.__dict__.get(name)


def _micro(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Count one call of the root: a data batch, with its tokens and padding when a mask says,
    if its input (the token tensor, else the first tensor) is data this step has not fed yet;
    else only a call. Not new data, read from metadata alone:

    - the same tensor again, unchanged (an LBFGS closure evaluated again, two losses on one
      batch), or the last batch's data through a new view (`x[:, :-1]` sliced again for SAM's
      second pass: `_same_data`); a buffer refilled in place has a new version and is new data;
    - a tensor computed in the autograd graph (a generator's fake batch, an interpolation of a
      real and a fake one);
    - a leaf that requires grad, shaped like a data batch of the same step (a gradient
      penalty's or an adversarial example's input; a physics-informed loop's points that
      require grad are its only batch, and stay data);
    - while the first iteration is watched, a tensor sharing storage with another model's
      output (the fake batch, detached: `first_iteration`).

    One function, no helpers: every root call of a model without a token tensor comes here,
    and each Python call more would be the user's (the same count as before this rule)."""
    s = state
    tokens = tok.find(args, kwargs)
    x = tokens
    if x is None:
        x = args[0] if args and type(args[0]) is s.tensor_cls else tok.first_tensor(args, kwargs)
    new = True
    if x is not None:
        last = s.last_in
        version = x._version
        if version == s.last_ver and (
            s.last_ids is x or (type(last) is weakref.ref and last() is x) or _same_data(x)
        ):
            new = False
        elif x.grad_fn is not None:
            new = False
        else:
            shape = tuple(x.shape)
            if (x.requires_grad and _shape_in_step(shape)) or (
                s.learning and first_iteration.made_by_model(x)
            ):
                new = False
            else:
                if s.last_ver >= 0:
                    _shape_seen(s.last_shape)
                # token ids strongly (a few KB; the fast path of `_root_call` compares them),
                # anything else weakly: an image batch held past its use would keep memory
                if x is tokens:
                    s.last_ids, s.last_in, s.ids_ver = x, None, -2  # size not read here
                else:
                    s.last_ids, s.last_in = None, weakref.ref(x)
                    base = x._base  # a view: its base, weakly (see `_same_data`)
                    s.last_view = (
                        None if base is None
                        else (weakref.ref(base), x.data_ptr(), x.stride(), x.dtype)
                    )
                s.last_shape, s.shape_ver, s.last_ver = shape, version, version
    if not new:
        s.n_calls += 1
    else:
        s.n_micro += 1
        if first_iteration.watching:
            first_iteration.data_batch(x, tokens)
        if tokens is not None:
            s.n_tokens += tokens.numel()
            if not s.any_tokens:
                s.any_tokens = True
                step_totals.mark_tokens()
            if tokens is (args[0] if args else None):
                # the fast path of `_root_call` looks for this dtype; while the first iteration
                # is watched every call comes here instead, and the dtype is set at its end
                if first_iteration.watching:
                    first_iteration.ids_dtype[:] = [tokens.dtype]
                else:
                    s.ids_dtype = tokens.dtype
            real = _real(tokens, kwargs) if s.real_on and kwargs else None
            if real is None:
                s.n_missing += 1
            else:
                s.n_real += real
        elif (
            x is not None
            and len(args) == 1
            and x is args[0]
            and not kwargs
            and not first_iteration.watching
            and tok.never_tokens(x.dtype)
        ):
            s.plain_dtype = x.dtype  # the fast path of `_root_call` counts such calls alone
    if s.capture is not None:
        s.capture.append((args, kwargs, tokens))
        s.capture = None
    s.fast = True  # no capture asked (a listener may ask one), the first call seen: fast path on
    if not s.first_done:
        s.first_done = True
        for listener in tuple(first_forward):
            call(listener, module, tokens, args, kwargs)


def _same_data(x: Any) -> bool:
    """Whether `x`, fed at the version the step's last data batch was fed at, is that batch's
    data again through a new view: the same first element, shape, strides and dtype. Why: a loop
    that slices its batch at each forward (`model(x[:, :-1])`) and runs two passes of it (SAM's
    two steps, an LBFGS closure, R-Drop) feeds a new tensor object each time; by identity each
    was a new batch (tokens and samples per step twice the truth). Called only when the version
    counters agree (a view shares its base's): a refill in place is still new data. Token ids
    are held by the state, so no other tensor can sit at their addresses; another batch is held
    weakly and may have died with its graph: then its base, kept weakly while a view, stands
    for it (alive, its storage cannot have been reused)."""
    s = state
    try:
        y = s.last_ids
        if y is None:
            last = s.last_in
            y = last() if type(last) is weakref.ref else None
        if y is not None:
            return (
                x.data_ptr() == y.data_ptr()
                and x.shape == y.shape
                and x.stride() == y.stride()
                and x.dtype is y.dtype
            )
        view = s.last_view
        if view is None or view[0]() is None:
            return False
        return (
            x.data_ptr() == view[1]
            and x.stride() == view[2]
            and x.dtype is view[3]
            and s.last_shape is not None
            and tuple(x.shape) == tuple(s.last_shape)
        )
    except Exception:  # noqa: BLE001 - a fake or meta tensor: no address, taken as new data
        return False


#: the step whose data batches' shapes `_shapes` holds, and those shapes, but for the last data
#: batch's (`state.last_shape`, read once per tensor and kept with it from step to step, while
#: `state.last_ver >= 0`: a batch was fed in the step in progress): the common step feeds one
#: batch and builds no set
_shapes: list[Any] = [-1, set()]


def _shape_seen(shape: Any) -> None:
    """A data batch of the step in progress had this shape (None: a token batch of the fast
    path, whose shape no rule reads)."""
    if shape is None:
        return
    if _shapes[0] != state.n_steps:
        _shapes[0], _shapes[1] = state.n_steps, set()
    _shapes[1].add(shape)


def _shape_in_step(shape: tuple[int, ...]) -> bool:
    """Whether a data batch of the step in progress had this shape."""
    s = state
    if s.last_ver >= 0 and s.last_shape is not None and s.last_shape == shape:
        return True
    return _shapes[0] == s.n_steps and shape in _shapes[1]


def _real(tokens: Any, kwargs: dict[str, Any]) -> int | None:
    try:
        return tok.real(tokens, kwargs)
    except Exception as exc:  # noqa: BLE001 - counting padding is optional: stop only that
        state.real_on = False
        guard.off("real tokens", exc)
        return None


# ---- when no optimizer marks the step (see `step_signal`) ---------------------------------


def _backward_step() -> None:
    """A backward pass through the root's output, with no optimizer in the process."""
    s = state
    if s.n_micro != s.c_micro or s.n_calls != s.c_calls:
        signal.say("backward")
        _commit()


def _at_exit() -> None:
    """The process ends with training forwards seen and no step: say why steps are absent."""
    s = state
    if s.n_steps or s.root is None or s.n_micro == 0 or signal.said():
        return
    signal.say(
        "none",
        f"training-mode forwards of {type(s.root).__name__} with gradients on were seen, but no "
        "optimizer step and no backward pass through its output: no step can be counted",
    )


def _weak(optimizer: Any) -> Any:
    try:
        return weakref.ref(optimizer)
    except TypeError:  # an optimizer class without weak references: taken as alive
        return lambda: True


def _after_step(optimizer: Any, args: Any, kwargs: Any) -> None:
    """The optimizer step post-hook. The steady step (the one optimizer of the loop stepping
    again after forwards of the root, everything else settled) is a comparison and `_commit`;
    anything else takes `_step`."""
    s = state
    # each slot read as an attribute, then called: `s.compiling()` is a LOAD_METHOD, which 3.11
    # does not specialize for a slot (a generic lookup each step, ~100 instructions)
    compiling = s.compiling
    if compiling():
        # a compiled optimizer step: this hook is being traced, and counting here would need a
        # graph break. Say so once, at compile time, instead of counting nothing silently
        compile_support.note_compiled_step()
        return
    solo = s.solo_ref
    if solo() is optimizer and s.n_micro != s.c_micro:
        # what `_step` would do (the cycle is this optimizer's alone, as it was): its
        # `step_totals.commit`, written out here, where a call would cost a tenth of the step
        try:
            s.c_micro = micro = s.n_micro
            s.c_calls = s.n_calls
            s.last_ver = -1
            s.n_steps = n = s.n_steps + 1
            s.t = t = _monotonic()
            if s.any_tokens:
                _pack_totals(s.hdr, _TOTALS_AT, s.n_tokens, s.n_real, s.n_missing, micro, t, n)
            else:
                _pack_step(s.hdr, _STEP_AT, micro, t, n)
            if step_listeners:
                for listener in tuple(step_listeners):
                    call(listener, n)
        except Exception as exc:  # noqa: BLE001 - promise 1
            _fail(exc)
        return
    _step(optimizer)


def _step(optimizer: Any) -> None:
    """An optimizer stepped: a new step, another optimizer of the step in progress, or the same
    one again with no forward since."""
    s = state
    try:
        s.solo_ref = bool  # not settled: returns no optimizer
        signal.optimizer_made()  # an optimizer that steps (even one made before we attached)
        key = id(optimizer)
        cycle = s.cycle
        if key not in cycle and any(ref() is not None for ref in cycle.values()):
            cycle[key] = _weak(optimizer)  # another optimizer of the same iteration
            if first_iteration.watching:
                first_iteration.optimizer(optimizer, joined=True)
            elif key not in first_iteration.known:
                first_iteration.late(optimizer)  # a model the first iteration did not see
            return
        if first_iteration.watching:
            first_iteration.optimizer(optimizer, joined=False)
        if s.n_micro == s.c_micro and s.n_calls == s.c_calls and s.root is not None:
            # the same optimizer again with no forward of the root since its last step: not a
            # new step. The model may have been replaced: look for the root again
            if not s.discovery:
                root_finder.start()
            return
        # a new dict, not the old one cleared: a reader that kept the last step's (`step_cycle`,
        # during warm-up) finds in it every optimizer that stepped in that step
        ref = _weak(optimizer)
        s.cycle = {key: ref}
        signal.say("optimizer")
        _commit()
        if isinstance(ref, weakref.ref) and not first_iteration.watching:
            s.solo_ref = ref  # settled: its next step takes `_after_step`'s path
    except Exception as exc:  # noqa: BLE001 - promise 1
        _fail(exc)


def _forget_dry_run() -> None:
    """The process makes its first optimizer, and the root ran training forwards since the last
    step that no backward followed (with no optimizer each backward is a step): a dry run before
    there was anything to train with (lazy modules materialized on a dummy batch, as torch's
    documentation of them recommends; an output's shape printed), not the first step's data.
    Its micro-batches and tokens are forgotten, back to the totals last published, and so is
    the first iteration's record of its batch: before, the dummy's one row made samples per step
    2 of 4. (A forward run before the first optimizer is made and backpropagated after it would
    be forgotten too: no loop we know does that.)"""
    s = state
    try:
        if s.n_micro == s.c_micro and s.n_calls == s.c_calls:
            return
        published = step_totals.totals()
        s.n_tokens, s.n_real, s.n_missing = published.tokens, published.real, published.real_missing
        s.n_micro, s.n_calls = s.c_micro, s.c_calls
        s.last_ver = -1  # the next batch is new data, whatever it is
        first_iteration.forget_batches()
    except Exception as exc:  # noqa: BLE001 - promise 1
        _fail(exc)


def _forked() -> None:
    """A forked child (a `multiprocessing` worker, a DataLoader worker). Its parent's step in
    progress and unsent totals are not its own (`step_totals.forget_after_fork`), nor is the
    iteration its parent's optimizers were in: an optimizer the child makes would join that
    iteration and its first step would not count. And the child may train another model than
    its parent's root (a worker per model), whose first forwards nothing would count: so when the
    parent had a root, the child looks for its own again from its first forward (it re-adopts
    the parent's model in place if that is what it trains). A DataLoader worker stops looking
    at its first module call (`root_finder.start_in_fork_child`)."""
    try:
        step_totals.forget_after_fork()
        s = state
        s.cycle.clear()
        s.solo_ref = bool
        if s.learning:  # the parent's first iteration is not the child's to watch
            first_iteration.reset()
            root_finder.remove(s.discovery)
        if s.root is not None and not s.discovery:
            root_finder.start_in_fork_child()
        if ring_module.active is None and _ring_at_first_step not in step_listeners:
            _fork_base[:] = [step_totals.mine()]
            step_listeners.append(_ring_at_first_step)
    except Exception as exc:  # noqa: BLE001 - promise 1
        _fail(exc)


def _ring_at_first_step(n: int) -> None:
    """A forked child that had no room for its ring at the fork trains: it takes one of `tm`'s
    spares now, so its steps survive however it ends. Once: it takes itself off."""
    step_listeners.remove(_ring_at_first_step)
    if ring_module.active is None:
        ring = ring_module.current()  # its totals now include this step: the base is the fork's
        if ring is not None and _fork_base:
            step_totals.set_base(ring, _fork_base[0])


_fork_base: list[Totals] = []  # this child's totals as it was forked (its parent's)
_ring_at_first_step.probe = "steps"  # type: ignore[attr-defined]


# ---- attaching ---------------------------------------------------------------------------


def _fail(exc: BaseException) -> None:
    detach()
    guard.off("steps", exc)
    guard.off("tokens", "the steps probe it rides on is off")


#: kept for the benchmarks, which set up `state.compiling` as attach() does
_compiling_check = compile_support.compiling_check


def bind_torch(torch: Any) -> None:
    """What the probe reads of torch, bound into `state` (attach; the benchmarks alone)."""
    from torch.nn.modules import module as nn_module

    s = state
    s.nn_module = nn_module
    s.jit_trace = sys.modules.get("torch.jit._trace")  # imported with torch
    s.compiling = _compiling_check(torch)
    s.tensor_cls = torch.Tensor
    s.grad_on = torch.is_grad_enabled
    s.count, s.patch, s.fail = _micro, _CallPatch, _fail


def attach(torch: Any) -> list[str]:
    """Start discovery and hook every optimizer; return the probe names that attached."""
    from torch.optim import optimizer as optim_module

    tok.bind(torch)
    # torch warns that global hooks fire once more for a torch.compile wrapper; the depth
    # counter already handles that, and the warning would be ours, not the user's
    warnings.filterwarnings(
        "ignore", message=r"Using `torch.compile\(module\)` when there are global hooks"
    )
    bind_torch(torch)
    signal.bind(torch, state.compiling, _backward_step, _fail)
    signal.on_first_optimizer = _forget_dry_run
    compile_support.install(torch, root_finder.compiled_pre, _fail)
    root_finder.start()
    state.step_hook.append(optim_module.register_optimizer_step_post_hook(_after_step))
    sender = get_sender()
    if sender is not None:
        sender.add_drain(drain)
        ring_module.on_new.append(step_totals.bind_ring)
        ring = ring_module.current()
        if ring is not None:
            step_totals.bind_ring(ring)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_forked)
    atexit.register(first_iteration.at_exit)  # a run of one step: its first iteration
    atexit.register(_at_exit)  # after the sender's: runs first, before its last flush
    return ["steps", "tokens"]


def detach() -> None:
    """Remove every hook (a failed probe, or a test)."""
    root_finder.end()
    root_finder.remove(state.step_hook)
