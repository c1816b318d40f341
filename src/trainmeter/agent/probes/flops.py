"""Counted FLOPs: what one real training step executed, per token (the `counted` convention).

After warm-up (the step after `ARM_AFTER`), one whole step runs inside a dispatch mode that adds
up FLOP formulas: torch's (`torch.utils.flop_counter`'s registry) and ours for the matmul-class
operators torch has none for (`flop_formulas`: grouped matmuls, matrix-vector products, fused
recurrent layers, CPU attention). With an optimizer the mode is entered in its post-hook of step
`ARM_AFTER` and left in the post-hook of the next step; with none (weights updated by hand) it is
entered at the root's next training forward and left at the forward after the next step (see
`on_step`). Either way every micro-batch's forward and backward of that step is seen. The mode
runs each operator as it comes and only reads shapes after it, with no module hooks and no
decomposition, so the step computes exactly what it would have computed without us, bit for
bit. A matmul-class operator that ran with no formula is named (`counted_missing_ops`), never
left out silently.

A loop whose steps differ in which optimizers step (a DCGAN stepping its discriminator twice per
generator step: steps alternate "D only" and "D plus G") has no representative step: there the
window stays open for one whole cycle of steps, the repeat period seen in warm-up
(`step_cycle`), and FLOPs per step are the cycle's divided by its length (per token, by its
tokens). Every loop of one optimizer, or of several all stepping every step, has a period of 1:
one step, as above. The note says over which steps it counted.

A compiled model runs kernels the mode cannot see, and running it under a dispatch mode could
make dynamo recompile. So for a model wrapped by `torch.compile` the step itself is left alone:
the first micro-batch's inputs are captured and the *uncompiled* module (`_orig_mod`) is copied
into a `FakeTensorMode` (shapes only: no memory, no device, no kernel, no random numbers drawn)
and run forward and backward there under the counter. Anything else (a model compiled in place,
a compiled training function, an operator fake tensors cannot run) gets a `counted_unavailable`
fact with the reason instead of a number.
"""

from __future__ import annotations

import atexit
import copy
import os
import sys
from typing import Any

from ...payloads import FACT
from ..sender import get_sender
from . import flop_formulas, phases, step_cycle, steps
from . import step_signal as signal
from .model import unwrap_chain

ARM_AFTER = 2
MAX_TRIES = 3
NOTE = (
    "torch's FLOP formulas (FlopCounterMode's) and the agent's over one whole step: executed "
    "matmul (grouped and batched too), convolution, recurrent and attention FLOPs (attention in "
    "full, causal masking not halved; elementwise, normalization and softmax work not counted)"
)

_torch: Any = None
_counter_cls: Any = None
_mode: Any = None
_start: tuple[int, int] = (0, 0)  # (tokens committed, eval spans) when the window opened
_period = 1  # the steps the window stays open: one cycle of the loop's steps (`step_cycle`)
_differ = False  # no period was found in warm-up: one step is counted, and the note says so
_idle = 0  # optimizers made that stepped in none of the watched steps, left out of the period
_left = 0  # the steps still to run before the open window closes
_compiled: str | None = None  # how the model is compiled: None, "wrapper", or a reason
_captured: list[Any] = []
_tries = 0


def _send(key: str, value: Any, note: str) -> None:
    sender = get_sender()
    if sender is not None:
        sender.send(FACT.name, FACT.build(key=key, value=value, source="measured", note=note))


def _unavailable(reason: str) -> None:
    _send("counted_unavailable", reason, reason)
    _finish()


def _finish() -> None:
    _stop_waiting()
    if on_step in steps.step_listeners:
        steps.step_listeners.remove(on_step)


def _dynamo_frames() -> int:
    utils = sys.modules.get("torch._dynamo.utils")
    try:
        return int(utils.counters["frames"]["total"]) if utils is not None else 0
    except Exception:  # noqa: BLE001 - torch internals vary by version: no count, no harm
        return 0


def _counting_mode_class() -> Any:
    """A dispatch mode that runs every operator exactly as it comes and adds up torch's FLOP
    formulas (`torch.utils.flop_counter`'s registry, with ours from `flop_formulas` added) for
    the ones that have one, and names the matmul-class operators that ran with none.

    Not `FlopCounterMode` itself: it also enters a `ModuleTracker`, whose hooks put extra nodes
    into the autograd graph, and that changed the order in which gradients are summed: under it a
    tiny Llama's gradients (and its weights after the step) differed in the last bits from the
    run without `tm` (promise 1). It also decomposes operators it has no formula for and runs the
    pieces instead. This mode does neither: it only reads shapes after each call.

    `_should_skip_dynamo` is False: otherwise torch wraps `__torch_dispatch__` in
    `_disable_dynamo`, which imports `torch._dynamo` at the first operator (2 s on a 2-core box:
    the stall a loop saw after step 2). What that wrapper is for is done instead by telling
    dynamo's frame evaluator (C, no import) to skip the method's code and every frame it calls
    (`_skip_dynamo`): else a compiled function called while the mode is on would have dynamo
    trace and compile the mode's own method. (While the mode is on, torch.compile runs the
    user's functions eagerly, as it did with the wrapper; a step with compiled code in it is
    never counted live: `on_step`.)"""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import FlopCounterMode

    class CountingMode(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            return False

        def __init__(self, custom_mapping: dict[Any, Any]) -> None:
            super().__init__()
            # the registry with the custom formulas wrapped the way torch wraps them
            torch_mode = FlopCounterMode(display=False, custom_mapping=custom_mapping)
            self.registry = torch_mode.flop_registry
            # the formulas over shapes, unwrapped: torch's wrapper turns every argument into
            # its shape with a pytree map, several times the cost of the rest of an operator
            # here; `_shapes` does the same for the arguments formulas take (see `formula_of`)
            self.raw = {
                op: getattr(f, "__wrapped__", None) for op, f in self.registry.items()
            }
            self.total = 0
            self.plain: set[Any] = set()  # operators known to need no formula
            self.missing: dict[str, int] = {}  # matmul-class operators with no formula: calls
            self.failed: dict[str, str] = {}  # operators whose formula raised: why
            self.mode = self  # what `_close_live` compares with the current dispatch mode

        def __torch_dispatch__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            packet = func._overloadpacket
            formula = self.registry.get(packet)
            if formula is not None:
                try:
                    raw = self.raw.get(packet)
                    if raw is not None:
                        shaped = {k: _shape(v) for k, v in kwargs.items()} if kwargs else {}
                        self.total += raw(*map(_shape, args), **shaped, out_shape=_shape(out))
                    else:  # a formula that takes the tensors themselves (flex attention)
                        self.total += formula(*args, **kwargs, out_val=out)
                except Exception as exc:  # noqa: BLE001 - promise 1: counted 0, and named
                    self.failed.setdefault(str(packet), f"{type(exc).__name__}: {exc}"[:120])
            elif packet not in self.plain:
                name = str(packet)
                if flop_formulas.matmul_class(name):
                    self.missing[name] = self.missing.get(name, 0) + 1
                else:
                    self.plain.add(packet)
            return out

        def get_total_flops(self) -> int:
            return int(self.total)

    tensor = _torch.Tensor if _torch is not None else None

    def _shape(x: Any) -> Any:
        """What torch's `shape_wrapper` hands a formula: a tensor's shape, a list or tuple of
        them (a fused RNN's weights, an output tuple) as shapes, anything else as it is."""
        if isinstance(x, tensor):
            return x.shape
        if type(x) is list or type(x) is tuple:
            return type(x)(v.shape if isinstance(v, tensor) else v for v in x)
        return x

    _skip_dynamo(CountingMode.__torch_dispatch__)
    return CountingMode


def _skip_dynamo(function: Any) -> None:
    """Dynamo never traces `function` nor anything it calls (its frame evaluator's own skip,
    set on the code object: what `torch._dynamo.skip_code` does, recursively, without importing
    torch._dynamo). Another torch without it: nothing to do, its wrapper does the same."""
    try:
        from torch._C._dynamo import eval_frame

        skip = eval_frame._FrameAction.SKIP
        strategy = eval_frame._FrameExecStrategy(skip, skip)
        eval_frame.set_code_exec_strategy(function.__code__, strategy)
    except Exception:  # noqa: BLE001 - torch internals vary by version
        pass


def on_first_forward(root: Any, tokens: Any, args: Any, kwargs: Any) -> None:
    """Decide how this model can be counted, and import the counter before the first step."""
    global _counter_cls, _compiled

    _counter_cls = _counting_mode_class()
    _compiled = None
    if any(hasattr(m, "_orig_mod") for m in unwrap_chain(root)):
        _compiled = "wrapper"
    elif any(getattr(m, "_compiled_call_impl", None) is not None for m in root.modules()):
        _compiled = "submodules compiled in place (module.compile()): not counted"
    if on_step not in steps.step_listeners:
        steps.step_listeners.append(on_step)


on_first_forward.probe = "flops"  # type: ignore[attr-defined]


def on_step(n: int) -> None:
    """After each step: open the counted window after warm-up, close it one cycle later.

    The cycle is the repeat period of which optimizers step in each step (`step_cycle`): 1 for
    a loop of one optimizer, or of several that all step in every step (the window of one step
    after `ARM_AFTER`, as ever); 2 for a DCGAN stepping its discriminator twice per generator
    step, 5 for a WGAN's n_critic=5 (the window opens once the period is seen, and counts that
    many steps). No period seen by `step_cycle.WATCH` steps: one step, and the note says steps
    differ.

    With an optimizer the window opens and closes in its step post-hook, on the training
    thread. With no optimizer the step is marked inside the backward pass (`step_signal`), where
    the autograd engine runs our hook under a copy of the thread's dispatch state: a mode
    entered there is gone once the backward ends (what made counting fail with "another dispatch
    mode was entered"). So there the window opens and closes at the root's next training
    forward instead (a one-shot pre-hook on the root, gone once it ran): from one step's forward
    to the next's, one whole step."""
    global _left, _period, _differ, _idle
    if _waiting:
        return  # a one-shot hook waits for the next forward
    if _mode is not None:
        _left -= 1
        if _left > 0:
            return  # the cycle's steps are not all run yet
        if signal.by_backward:
            _at_next_forward(lambda: _close_live(n, at_forward=True), closing=n)
        else:
            _close_live(n)
    elif _captured:
        _count_fake()
    else:
        step_cycle.seen(n)
        if n < ARM_AFTER:
            return
        if isinstance(_compiled, str) and _compiled != "wrapper":
            _unavailable(_compiled)
            return
        if _compiled == "wrapper":
            steps.capture_next(_captured)
            return
        found = step_cycle.period()
        if found is None and n < step_cycle.WATCH:
            return  # the steps' period is not seen yet
        unused: set[int] = set()
        if found is None:
            # an optimizer made that never stepped in the watch (one kept for a later phase)
            # stops any period: the steps are looked at again without it, and the note says so
            unused = step_cycle.idle()
            found = step_cycle.period_without(unused) if unused else None
        _period, _differ = found or 1, found is None
        _idle = len(unused) if found is not None else 0
        if _dynamo_frames():
            _unavailable(
                "torch.compile is in use outside the model; counting a live step could "
                "make it recompile, so no step was counted"
            )
        elif signal.by_backward:
            _at_next_forward(_open_live)
        else:
            _open_live()


on_step.probe = "flops"  # type: ignore[attr-defined]


def counter() -> Any:
    """The counting mode, with formulas for the matmul-class ops torch's registry lacks
    (`flop_formulas`: grouped matmuls, mv/dot, fused recurrent layers, CPU attention ...)."""
    global _sdpa
    aten = _torch.ops.aten
    mapping: dict[Any, Any] = {}
    for name, formula in flop_formulas.ATEN.items():
        op = getattr(aten, name, None)
        if op is not None:
            mapping[op] = formula
    for namespace, name, formula in flop_formulas.CUSTOM + flop_formulas.CUSTOM_BACKWARD:
        op = _custom_op(namespace, name)
        if op is not None:
            mapping[op] = formula
    try:
        from torch.utils.flop_counter import sdpa_backward_flop_count, sdpa_flop_count
    except ImportError:
        _missed("this torch has no sdpa_flop_count to count CPU attention with")
    else:
        _sdpa = (sdpa_flop_count, sdpa_backward_flop_count)
        for names, formula in (
            (flop_formulas.ATTENTION, _cpu_attention),
            (flop_formulas.ATTENTION_BACKWARD, _cpu_attention_backward),
        ):
            for name in names:
                op = getattr(aten, name, None)
                if op is not None:
                    mapping[op] = formula
    return _counter_cls(mapping)


def _custom_op(namespace: str, name: str) -> Any:
    """A library's custom operator, when that library registered it (else None: never import
    the library for it)."""
    try:
        if namespace not in _torch.ops._dir:  # loaded namespaces only
            return None
        return getattr(getattr(_torch.ops, namespace), name, None)
    except Exception:  # noqa: BLE001 - another torch's internals: no formula, no harm
        return None


_sdpa: tuple[Any, Any] | None = None
#: Why attention was left out of the count (None: it was counted, or there was none).
attention_missed: str | None = None


def _missed(reason: str) -> None:
    global attention_missed
    attention_missed = attention_missed or reason


def _cpu_attention(q: Any, k: Any, v: Any, *args: Any, out_shape: Any = None, **kw: Any) -> int:
    """Runs inside the user's step: it must never raise, so a shape it cannot read counts 0 and
    the note says attention was left out."""
    try:
        return int(_sdpa[0](q, k, v))  # type: ignore[index]
    except Exception as exc:  # noqa: BLE001 - promise 1: an unreadable shape is counted as 0 and said
        _missed(f"CPU attention of shapes {tuple(q)}, {tuple(k)} not counted ({exc})"[:200])
        return 0


def _cpu_attention_backward(
    grad_out: Any, q: Any, k: Any, v: Any, *args: Any, out_shape: Any = None, **kw: Any
) -> int:
    try:
        return int(_sdpa[1](grad_out, q, k, v))  # type: ignore[index]
    except Exception as exc:  # noqa: BLE001 - promise 1: an unreadable shape is counted as 0 and said
        _missed(
            f"CPU attention backward of shapes {tuple(q)}, {tuple(k)} not counted ({exc})"[:200]
        )
        return 0


#: the one-shot pre-hook on the root waiting for its next training forward (0 or 1 handle)
_waiting: list[Any] = []
_closing: int | None = None  # the step the waiting hook closes the window after (else: opens)


def _at_next_forward(then: Any, closing: int | None = None) -> None:
    """Run `then` at the root's next training-mode forward with gradients on, on the thread
    that runs it, before the forward (the micro-batch is counted already, not committed)."""
    global _closing
    root = steps.root()
    if root is None:
        return

    def hook(module: Any, args: Any) -> None:
        if steps.compiling() or not module.training or not _torch.is_grad_enabled():
            return
        _stop_waiting()
        try:
            then()
        except Exception as exc:  # noqa: BLE001 - promise 1
            _drop_mode()
            _unavailable(f"counting failed: {exc!r}"[:300])

    _closing = closing
    _waiting.append(root.register_forward_pre_hook(hook))


def _stop_waiting() -> None:
    global _closing
    _closing = None
    while _waiting:
        _waiting.pop().remove()


def _drop_mode() -> None:
    """Leave the counting mode if it is the current one (a failure, a fork)."""
    global _mode
    mode, _mode = _mode, None
    if mode is None:
        return
    try:
        from torch.utils._python_dispatch import _get_current_dispatch_mode

        if _get_current_dispatch_mode() is mode.mode:
            mode.__exit__(None, None, None)
    except Exception:  # noqa: BLE001 - promise 1: leaving the counting mode must never raise
        pass


def _open_live() -> None:
    global _mode, _start, _left
    mode = counter()
    mode.__enter__()
    _mode = mode
    _left = _period
    _start = (steps.totals().tokens, phases.count("eval"))


def _close_live(n: int, at_forward: bool = False) -> None:
    global _mode, _tries
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    mode = _mode
    if _get_current_dispatch_mode() is not mode.mode:
        _mode = None
        _unavailable("another dispatch mode was entered during the counted step")
        return
    mode.__exit__(None, None, None)
    _mode = None
    tokens = steps.totals().tokens - _start[0]
    if phases.count("eval") != _start[1] or phases.eval_open():
        _tries += 1
        if _tries >= MAX_TRIES:
            _unavailable("every counted step had an eval span inside it")
        else:
            _open_live()  # an eval ran inside the window: count the next cycle instead
        return
    _report(mode, tokens, window_note(n, _period, _differ, _idle), _period)


def window_note(n: int, period: int, differ: bool, idle: int = 0) -> str:
    """Over which steps the count was made (the window closed after step `n`); `idle`: the
    optimizers made that stepped in none of the steps watched, left out of the period."""
    if idle:
        return window_note(n, period, differ) + (
            f"; {idle} optimizer{'s' if idle > 1 else ''} made in the process stepped in none "
            f"of the first {step_cycle.WATCH} steps (kept for later, or stepping less often "
            "than that): the count waited for them, and a step where one steps would add its "
            "FLOPs to this"
        )
    if differ:
        return NOTE + (
            f" (step {n}; steps differ: which optimizers step did not repeat with a period of "
            f"at most {step_cycle.MAX_PERIOD} steps in the first {step_cycle.WATCH}, or an "
            "optimizer made did not step in them, so this one step may not be their average)"
        )
    if period == 1:
        return NOTE + f" (step {n})"
    return NOTE.replace("over one whole step", f"over {period} whole steps") + (
        f" (steps {n - period + 1}-{n}: one cycle of the loop, whose steps repeat which "
        f"optimizers step every {period} steps; FLOPs per step are the cycle's / {period})"
    )


def _close_at_exit() -> None:
    """The process ends while the window waits for a forward that will not come (the counted
    step was the last one, marked by its backward): the step is whole, close it here."""
    if _mode is not None and _closing is not None:
        n = _closing
        _stop_waiting()
        try:
            _close_live(n)
        except Exception:  # noqa: BLE001 - promise 1
            _drop_mode()


def _missing_text(mode: Any) -> str:
    """The matmul-class operators that ran with no formula, and the formulas that failed."""
    parts = [f"{name} ({calls} calls)" for name, calls in sorted(mode.missing.items())]
    parts += [f"{name} (formula failed: {why})" for name, why in sorted(mode.failed.items())]
    return ", ".join(parts)


def _report(mode: Any, tokens: int, note: str, n_steps: int = 1) -> None:
    """Send the count of `n_steps` whole steps holding `tokens` tokens: FLOPs per step are the
    total over `n_steps`, per token the total over the tokens."""
    flops = mode.get_total_flops()
    per_step = flops // n_steps if flops % n_steps == 0 else flops / n_steps
    if attention_missed:
        note += f"; attention NOT included: {attention_missed}"
    missing = _missing_text(mode)
    if missing:
        note += f"; NOT counted (matmul-class operators with no FLOP formula): {missing}"
        _send(
            "counted_missing_ops",
            sorted({**mode.missing, **dict.fromkeys(mode.failed, 0)}),
            "matmul-class operators that ran in the counted step with no FLOP formula (or "
            f"whose formula failed): their FLOPs are not in the count: {missing}",
        )
    if flops <= 0:
        _unavailable(
            "the counted step ran no matmul, convolution or attention with a FLOP formula"
            + (f" (without one: {missing})" if missing else "")
        )
    elif tokens <= 0:
        _send("counted_flops_per_step", per_step, note)
        _unavailable("no token tensor was seen, so FLOPs per token cannot be formed")
    else:
        _send("counted_flops_per_step", per_step, note)
        _send(
            "counted_flops_per_token", flops / tokens, note + f", {flops} FLOPs / {tokens} tokens"
        )
        _finish()


_GLOBAL_HOOKS = (
    "_global_forward_pre_hooks",
    "_global_forward_hooks",
    "_global_backward_pre_hooks",
    "_global_backward_hooks",
)
_MODULE_HOOKS = ("_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks", "_backward_hooks")


def fake_refusal(module: Any) -> str | None:
    """Why running a fake copy of `module` could touch the run, or None when it cannot.

    The copy runs the module's Python code: a forward/backward hook on it (the user's
    activation logger, FSDP2's all-gather) would run too and change the user's state or issue a
    collective on this rank alone; an FSDP unit or a DTensor parameter communicates in forward."""
    globals_ = sys.modules.get("torch.nn.modules.module")
    if any(getattr(globals_, name, None) for name in _GLOBAL_HOOKS):
        return "global module hooks are registered"
    for sub in module.modules():
        if "FullyShardedDataParallel" in type(sub).__name__ or type(sub).__name__.startswith(
            "FSDP"
        ):
            return "the model is sharded (FSDP): its forward communicates"
        if any(getattr(sub, name, None) for name in _MODULE_HOOKS):
            return f"{type(sub).__name__} has forward or backward hooks"
    for p in module.parameters():
        if type(p).__name__ == "DTensor" or type(getattr(p, "data", None)).__name__ == "DTensor":
            return "the model has DTensor parameters: its forward communicates"
    return None


def _count_fake() -> None:
    """The compiled model: count its uncompiled module on fake tensors of the same shapes."""
    args, kwargs, tokens = _captured.pop()
    _captured.clear()
    module = unwrap_chain(steps.root())[-1]
    refusal = fake_refusal(module)
    if refusal is not None:
        _unavailable(f"the compiled model was not counted on a fake-tensor copy: {refusal}")
        return
    try:
        steps.pause(True)
        mode = fake_flops(module, args, kwargs)
    except Exception as exc:  # noqa: BLE001 - an operator fake tensors cannot run
        _unavailable(f"the compiled model could not be counted on fake tensors: {exc!r}"[:300])
        return
    finally:
        steps.pause(False)
    n = 0 if tokens is None else int(tokens.numel())
    _report(
        mode,
        n,
        "FlopCounterMode on a fake-tensor copy of the uncompiled module, forward "
        "and backward of one micro-batch",
    )


def _loss_like(out: Any) -> Any:
    """The tensor to run backward from: `.loss` if the model made one, else the first float
    output (the backward matmuls are the same whatever scalar is made from the logits)."""
    tensor = _torch.Tensor
    loss = getattr(out, "loss", None)
    if isinstance(loss, tensor):
        return loss
    items = (
        out.values() if isinstance(out, dict) else out if isinstance(out, (list, tuple)) else [out]
    )
    for item in items:
        if isinstance(item, tensor) and item.is_floating_point() and item.requires_grad:
            return item
    return None


def fake_flops(module: Any, args: Any, kwargs: Any) -> Any:
    """Run a fake-tensor copy of `module` forward and backward under the counter; the mode."""
    from torch._subclasses.fake_tensor import FakeCopyMode, FakeTensorMode
    from torch.utils._pytree import tree_map

    fake = FakeTensorMode()
    with FakeCopyMode(fake):
        clone = copy.deepcopy(module)

    def to_fake(x: Any) -> Any:
        return fake.from_tensor(x) if isinstance(x, _torch.Tensor) else x

    fargs, fkwargs = tree_map(to_fake, (tuple(args), dict(kwargs or {})))
    with fake, counter() as mode:
        out = clone(*fargs, **fkwargs)
        target = _loss_like(out)
        if target is not None:
            target.sum().backward()
    return mode


def _leave_mode_in_child() -> None:
    """A DataLoader worker forked while the window is open must not count for ever."""
    _stop_waiting()
    _drop_mode()
    _finish()


def attach(torch: Any) -> list[str]:
    global _torch
    _torch = torch
    steps.first_forward.append(on_first_forward)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_leave_mode_in_child)
    atexit.register(_close_at_exit)  # after the sender's: runs before its last flush
    return ["flops"]
