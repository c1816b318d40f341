"""The step probe's mutable state, in one object, and the callbacks other probes register on it.

The step probe is three modules with one job each: `root_finder` (which module is the model),
`step_totals` (the running totals and their publication in the ring) and `steps` (the hot path:
the root's calls and the optimizer's post-hook, and attaching). They share one `State` instance,
`state`, instead of module globals rebound with `global`: what the probe knows is in one place,
a test saves and restores its fields by name, and a reader sees where each one is written.
`__slots__` keeps each attribute read on the hot path close to a global's cost.

Standard library only (this runs inside the user's process).
"""

from __future__ import annotations

import weakref

from .. import ring as ring_module
from . import guard

TYPE_CHECKING = False  # typing costs milliseconds in every Python the run starts
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


class State:
    """Everything the step probe learns and counts in this process."""

    __slots__ = (
        # ---- root finding (`root_finder`)
        "depth",  # nesting of module calls while discovering (1 << 30: paused)
        "root",  # the module whose training forwards are micro-batches, or None
        "root_vars",  # where its training flag and hook dicts are read (`root_finder.root_vars`)
        "rejected",  # root calls that cannot be the model (no parameters): a WeakSet
        "first_done",  # the root's first counted forward ran (its listeners were called)
        "discovery",  # handles of the two global forward hooks, while discovering
        "root_hook",  # the root's class patch, and its first call's forward hook
        "step_hook",  # the optimizer step post-hook's handle
        # ---- the training thread's counts (plain ints; published by `step_totals.commit`)
        "n_steps",
        "n_tokens",
        "n_real",
        "n_missing",
        "n_micro",  # data batches: root calls that fed new input (see `steps._root_call`)
        "c_micro",  # n_micro at the last step: the step in progress is the difference
        "n_calls",  # root calls that fed no new data (the same batch again, a model's output)
        "c_calls",  # n_calls at the last step
        "last_in",  # a weak reference to the last data batch not of token ids (kept across
        #            steps: the same tensor fed again is known without a new reference), or None
        "last_ids",  # the last data batch of token ids (a few KB, held until another batch
        #             replaces it: the same tensor fed again is known at once), or None
        "ids_ver",  # the version counter of `last_ids` when its size was read (-2: not read)
        "ids_numel",  # its size then
        "last_ver",  # the last data batch's version counter when fed: an in-place refill is new
        #             data; -1 when none was fed in the step in progress
        "last_shape",  # the last data batch's shape (None for token ids of the fast path)
        "shape_ver",  # the version counter of `last_in` when `last_shape` was read
        "last_view",  # the last data batch not of token ids, when it is a view: (a weak reference
        #              to its base, its data_ptr, strides, dtype), else None (`steps._same_data`)
        "fast",  # `steps._root_call` may take its fast paths (first call seen, no capture asked)
        "t",  # time.monotonic() of the last step
        "any_tokens",  # a token tensor was seen (the ring header says so too)
        "real_on",  # counting padding still works (off after it raised once)
        "ids_dtype",  # the dtype of the token tensors seen first and alone (the fast path)
        "plain_dtype",  # a dtype no token tensor has, seen as the one argument (the fast path)
        "capture",  # a list to receive (args, kwargs, tokens) of the next counted call, or None
        "cycle",  # optimizers that stepped in the step in progress: id() -> weak reference
        #           (in the order they stepped; a new dict at each step `_step` begins)
        "learning",  # the first iteration is being watched (`first_iteration`): not the hot path
        "solo_ref",  # the weak reference (in `cycle`) of the one optimizer of a settled step,
        #             else `bool`: called, it returns no optimizer
        # ---- publication (`step_totals`)
        "hdr",  # where the totals are published: the ring's header, or a scratch buffer
        "sent",  # the totals last turned into a `step` record (sender thread)
        # ---- torch, bound at attach
        "nn_module",  # torch.nn.modules.module
        "jit_trace",  # torch.jit._trace (its `_trace_module_map`), or None
        "compiling",  # torch.compiler.is_dynamo_compiling (bool before attach: False)
        "grad_on",  # torch.is_grad_enabled (bool before attach: nothing counts)
        "tensor_cls",  # torch.Tensor
        # ---- callbacks bound by `steps.attach` for `root_finder` (no import circle)
        "count",  # count one micro-batch: f(module, args, kwargs)
        "patch",  # make the root's class count its calls: f(cls) -> something with .remove()
        "fail",  # turn the steps probe off: f(exc)
    )

    def __init__(self) -> None:
        self.depth = 0
        self.root: Any = None
        self.root_vars: Any = {"training": False}
        self.rejected: weakref.WeakSet[Any] = weakref.WeakSet()
        self.first_done = False
        self.discovery: list[Any] = []
        self.root_hook: list[Any] = []
        self.step_hook: list[Any] = []
        self.n_steps = self.n_tokens = self.n_real = self.n_missing = self.n_micro = 0
        self.c_micro = self.n_calls = self.c_calls = 0
        self.last_in: Any = None
        self.last_ids: Any = None
        self.ids_ver = -2
        self.ids_numel = 0
        self.last_ver = -1
        self.last_shape: Any = None
        self.shape_ver = -1
        self.last_view: Any = None
        self.fast = False
        self.learning = False
        self.t = 0.0
        self.any_tokens = False
        self.real_on = True
        self.ids_dtype: Any = None
        self.plain_dtype: Any = None
        self.capture: list[Any] | None = None
        self.cycle: dict[int, Any] = {}
        self.solo_ref: Any = bool
        self.hdr: Any = bytearray(ring_module.HEADER_BYTES)
        self.sent: Any = None  # set by `step_totals` (a Totals of zeros)
        self.nn_module: Any = None
        self.jit_trace: Any = None
        self.compiling: Callable[[], bool] = bool
        self.grad_on: Callable[[], bool] = bool
        self.tensor_cls: Any = None
        self.count: Callable[..., None] = _nothing
        self.patch: Callable[[type], Any] = _nothing
        self.fail: Callable[[BaseException], None] = _nothing


def _nothing(*args: Any) -> None:
    return None


#: The one instance: every module of the step probe reads and writes this.
state = State()


#: Called once per root module at its first counted forward: f(root, token_tensor, args, kwargs).
first_forward: list[Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], None]] = []
#: Called with the root module when it is adopted, before its first counted forward runs.
adopted: list[Callable[[Any], None]] = []
#: Called after each counted step with the step index; keep empty when nobody listens.
step_listeners: list[Callable[[int], None]] = []


def call(listener: Callable[..., None], *args: Any) -> None:
    """Run another probe's callback; if it raises, that probe goes off, not this one."""
    try:
        listener(*args)
    except Exception as exc:  # noqa: BLE001 - promise 1
        for group in (first_forward, step_listeners, adopted):
            if listener in group:
                group.remove(listener)
        guard.off(getattr(listener, "probe", listener.__module__.rpartition(".")[2]), exc)
