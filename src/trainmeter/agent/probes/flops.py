"""Counted FLOPs: what one real training step executed, per token (the `counted` convention).

After warm-up (the step after `ARM_AFTER`), one whole optimizer step runs inside a dispatch
mode that adds up torch's FLOP formulas (those of `torch.utils.flop_counter.FlopCounterMode`):
it is entered in the optimizer post-hook of step `ARM_AFTER` and left in the post-hook of the
next step, so every micro-batch's forward and backward of that step is seen. The mode runs each
operator as it comes and only reads shapes after it, with no module hooks and no decomposition,
so the step computes exactly what it would have computed without us, bit for bit.

A compiled model runs kernels the mode cannot see, and running it under a dispatch mode could
make dynamo recompile. So for a model wrapped by `torch.compile` the step itself is left alone:
the first micro-batch's inputs are captured and the *uncompiled* module (`_orig_mod`) is copied
into a `FakeTensorMode` (shapes only: no memory, no device, no kernel, no random numbers drawn)
and run forward and backward there under the counter. Anything else (a model compiled in place,
a compiled training function, an operator fake tensors cannot run) gets a `counted_unavailable`
fact with the reason instead of a number.
"""

from __future__ import annotations

import copy
import os
import sys
from typing import Any

from ..sender import get_sender
from . import phases, steps
from . import tokens as tok
from .model import unwrap_chain

ARM_AFTER = 2
MAX_TRIES = 3
NOTE = (
    "FlopCounterMode over one whole optimizer step: executed matmul, convolution and attention "
    "FLOPs (attention in full, causal masking not halved; elementwise, normalization and "
    "softmax work not counted)"
)
#: CPU attention ops FlopCounterMode has no formula for, by their aten names: counted as the
#: same two (forward) and five (backward) batched matmuls torch counts for the CUDA kernels.
CPU_ATTENTION = (
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_flash_attention_for_cpu_backward",
)

_torch: Any = None
_counter_cls: Any = None
_mode: Any = None
_start: tuple[int, int] = (0, 0)  # (tokens committed, eval spans) when the window opened
_compiled: str | None = None  # how the model is compiled: None, "wrapper", or a reason
_batch: int | None = None  # the first micro-batch's batch size (along the batch axis)
_tokens_shape: tuple[int, ...] = ()  # the first token tensor's shape, to read its batch again
_captured: list[Any] = []
_tries = 0


def _send(key: str, value: Any, note: str) -> None:
    sender = get_sender()
    if sender is not None:
        sender.send("fact", {"key": key, "value": value, "source": "measured", "note": note})


def _unavailable(reason: str) -> None:
    _send("counted_unavailable", reason, reason)
    _finish()


def _finish() -> None:
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
    formulas (`torch.utils.flop_counter`'s registry) for the ones that have one.

    Not `FlopCounterMode` itself: it also enters a `ModuleTracker`, whose hooks put extra nodes
    into the autograd graph, and that changed the order in which gradients are summed: under it a
    tiny Llama's gradients (and its weights after the step) differed in the last bits from the
    run without `tm` (promise 1). It also decomposes operators it has no formula for and runs the
    pieces instead. This mode does neither: it only reads shapes after each call."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import FlopCounterMode

    class CountingMode(TorchDispatchMode):
        def __init__(self, custom_mapping: dict[Any, Any]) -> None:
            super().__init__()
            # the registry with the custom formulas wrapped the way torch wraps them
            torch_mode = FlopCounterMode(display=False, custom_mapping=custom_mapping)
            self.registry = torch_mode.flop_registry
            self.total = 0
            self.mode = self  # what `_close_live` compares with the current dispatch mode

        def __torch_dispatch__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            formula = self.registry.get(func._overloadpacket)
            if formula is not None:
                self.total += formula(*args, **kwargs, out_val=out)
            return out

        def get_total_flops(self) -> int:
            return int(self.total)

    return CountingMode


def on_first_forward(root: Any, tokens: Any, args: Any, kwargs: Any) -> None:
    """Decide how this model can be counted, and import the counter before the first step."""
    global _counter_cls, _compiled, _batch, _tokens_shape

    _counter_cls = _counting_mode_class()
    _compiled = None
    _batch = tok.leading(tokens, args, kwargs)
    _tokens_shape = tuple(tokens.shape) if tokens is not None else ()
    if any(hasattr(m, "_orig_mod") for m in unwrap_chain(root)):
        _compiled = "wrapper"
    elif any(getattr(m, "_compiled_call_impl", None) is not None for m in root.modules()):
        _compiled = "submodules compiled in place (module.compile()): not counted"
    if on_step not in steps.step_listeners:
        steps.step_listeners.append(on_step)


on_first_forward.probe = "flops"  # type: ignore[attr-defined]


def on_step(n: int) -> None:
    global _mode, _start, _tries
    if n == 1 and _batch:
        _send_samples()
    if _mode is not None:
        _close_live(n)
    elif _captured:
        _count_fake()
    elif n >= ARM_AFTER:
        if isinstance(_compiled, str) and _compiled != "wrapper":
            _unavailable(_compiled)
        elif _compiled == "wrapper":
            steps.capture_next(_captured)
        elif _dynamo_frames():
            _unavailable(
                "torch.compile is in use outside the model; counting a live step could "
                "make it recompile, so no step was counted"
            )
        else:
            _open_live()


on_step.probe = "flops"  # type: ignore[attr-defined]


def _send_samples() -> None:
    """Samples per step on this rank: the first batch's batch size (dim 0, or dim 1 once the
    model probe has found the input sequence-first) x the micro-batches of the first step (only
    shapes are read)."""
    global _batch
    if len(_tokens_shape) > tok.batch_axis:  # the model probe may have learnt the layout since
        _batch = int(_tokens_shape[tok.batch_axis])
    micro = steps.totals().micro
    if micro > 0:
        sender = get_sender()
        if sender is not None:
            axis = "dim 1, sequence-first" if tok.batch_axis == 1 else "dim 0"
            note = f"batch size {_batch} of the first batch ({axis}) x {micro} micro-batch(es)"
            d = {"key": "samples_per_step", "value": _batch * micro, "source": "detected"}
            sender.send("fact", {**d, "note": note})


def counter() -> Any:
    """The counting mode, also counting the CPU attention ops torch has no formula for."""
    global _sdpa
    aten = _torch.ops.aten
    fwd, bwd = (getattr(aten, name, None) for name in CPU_ATTENTION)
    mapping: dict[Any, Any] = {}
    try:
        from torch.utils.flop_counter import sdpa_backward_flop_count, sdpa_flop_count
    except ImportError:
        _missed("this torch has no sdpa_flop_count to count CPU attention with")
    else:
        _sdpa = (sdpa_flop_count, sdpa_backward_flop_count)
        if fwd is not None:
            mapping[fwd] = _cpu_attention
        if bwd is not None:
            mapping[bwd] = _cpu_attention_backward
    return _counter_cls(mapping)


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


def _open_live() -> None:
    global _mode, _start
    mode = counter()
    mode.__enter__()
    _mode = mode
    _start = (steps.totals().tokens, phases.count("eval"))


def _close_live(n: int) -> None:
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
            _open_live()  # an eval ran inside the window: count the next step instead
        return
    _report(mode.get_total_flops(), tokens, NOTE + f" (step {n})")


def _report(flops: int, tokens: int, note: str) -> None:
    if attention_missed:
        note += f"; attention NOT included: {attention_missed}"
    if flops <= 0:
        _unavailable("FlopCounterMode saw no matmul, convolution or attention in the step")
    elif tokens <= 0:
        _send("counted_flops_per_step", flops, note)
        _unavailable("no token tensor was seen, so FLOPs per token cannot be formed")
    else:
        _send("counted_flops_per_step", flops, note)
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
        flops = fake_flops(module, args, kwargs)
    except Exception as exc:  # noqa: BLE001 - an operator fake tensors cannot run
        _unavailable(f"the compiled model could not be counted on fake tensors: {exc!r}"[:300])
        return
    finally:
        steps.pause(False)
    n = 0 if tokens is None else int(tokens.numel())
    _report(
        flops,
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


def fake_flops(module: Any, args: Any, kwargs: Any) -> int:
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
    return int(mode.get_total_flops())


def _leave_mode_in_child() -> None:
    """A DataLoader worker forked while the window is open must not count for ever."""
    global _mode
    if _mode is not None:
        try:
            _mode.__exit__(None, None, None)
        except Exception:  # noqa: BLE001 - promise 1: leaving the counting mode must never raise
            pass
        _mode = None
    _finish()


def attach(torch: Any) -> list[str]:
    global _torch
    _torch = torch
    steps.first_forward.append(on_first_forward)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_leave_mode_in_child)
    return ["flops"]
