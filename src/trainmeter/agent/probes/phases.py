"""Where wall time goes besides compute: data-loader waits, checkpoints, eval spans.

Each phase is timed where the loop already goes through torch (or transformers/safetensors):

- `data`: time inside `_BaseDataLoaderIter.__next__`, the one method every DataLoader iterator
  uses, except while an eval span is open (an eval loader's waits belong to eval);
- `checkpoint`: `torch.save`, and `save_pretrained` / safetensors `save_file` / `save_model` /
  `torch.distributed.checkpoint.save` when those modules get imported; a save nested in another
  save counts once;
- `eval`: from the root model's `.eval()` to its next `.train()` (`nn.Module.train` is wrapped:
  it runs only at mode switches, never per step); or, for a loop that switches modes its own way
  (Lightning sets `.training` flags directly when it restores train mode), from
  `begin_eval_span()` to `end_eval_span()`, called by that loop's tap; while such a span is
  held the mode switches inside it change nothing.

Totals only grow, on the training thread; the sender thread sends the difference since its last
look as `phase` records {name, s, n}, so no lock is needed and nothing is lost between flushes.

A record's time says which side of a step its seconds fell on (`tm` puts the waits before the
first step outside the training window, and a final eval after the last step in the tail). The
flush's own time is not that: a wait that ended before step 1 may be flushed after it. So the
first `add` after a step marks the totals as they stood at that step (`_mark`), and the sender
sends what was recorded up to the mark at the step's time, and the rest at the time it flushes
(or at the latest step's time, when a step came after the mark and no phase has been added
since).
"""

from __future__ import annotations

import functools
import os
import time

from ...payloads import FACT, PHASE
from .. import importhook
from ..sender import get_sender
from . import guard, steps

TYPE_CHECKING = False  # typing costs milliseconds in every Python the run starts
if TYPE_CHECKING:
    from typing import Any

NAMES = ("data", "checkpoint", "eval")

_totals: dict[str, list[float]] = {name: [0.0, 0] for name in NAMES}
_sent: dict[str, tuple[float, float]] = {name: (0.0, 0) for name in NAMES}
_eval_since: float | None = None
_held = 0  # eval spans opened by a loop's tap (begin_eval_span), not by mode switches
_saving = 0
_mark_step = 0  # the step count at the latest mark
# (the step's time, the totals at it); set on the training thread, read by the sender
_mark: tuple[float, dict[str, tuple[float, float]]] | None = None
_mark_sent: object = None


def count(name: str) -> int:
    """How many `name` spans this process recorded so far (the counted-FLOPs window asks)."""
    return int(_totals[name][1])


def add(name: str, seconds: float) -> None:
    if steps.step_count() != _mark_step:
        _set_mark()
    entry = _totals[name]
    entry[0] += seconds
    entry[1] += 1


def _set_mark() -> None:
    """The first phase added since a step: the totals so far were all recorded before it."""
    global _mark, _mark_step
    _mark_step = steps.step_count()
    _mark = (steps.last_step_t(), {name: (e[0], e[1]) for name, e in _totals.items()})


def drain() -> None:
    """Sender thread: `phase` records for what moved since the last flush, at the time of the
    step they preceded where one came after them (see the module docstring)."""
    global _mark_sent
    sender = get_sender()
    if sender is None:
        return
    mark = _mark
    if mark is not None and mark is not _mark_sent:
        _send_moved(sender, mark[1], mark[0])
        _mark_sent = mark
    # read before the totals: seconds added after this read are later than that step too
    t = steps.last_step_t() if steps.step_count() != _mark_step else None
    _send_moved(sender, _totals, t)


def _send_moved(sender: Any, totals: Any, t: float | None) -> None:
    for name in NAMES:
        s, n = totals[name]
        sent_s, sent_n = _sent[name]
        if n > sent_n:  # a mark read late may be behind what was already sent
            sender.send(PHASE.name, PHASE.build(name=name, s=s - sent_s, n=int(n - sent_n)), t=t)
            _sent[name] = (s, n)


def eval_open() -> bool:
    return _eval_since is not None


def in_span() -> bool:
    """An eval span is open or a checkpoint is being saved (a collective's wait in it belongs
    to that span in the time split)."""
    return _eval_since is not None or _saving > 0


# ---- data ----------------------------------------------------------------------------------


def _wrap_next(original: Any) -> Any:
    @functools.wraps(original)
    def __next__(self: Any) -> Any:
        if _eval_since is not None:
            return original(self)
        t0 = time.perf_counter()
        try:
            return original(self)
        finally:
            add("data", time.perf_counter() - t0)
            if _workers is None:
                _note_workers(self)

    __next__.__trainmeter_original__ = original  # type: ignore[attr-defined]
    return __next__


_workers: int | None = None  # the first training DataLoader's num_workers, sent once


def _note_workers(it: Any) -> None:
    """Send the DataLoader's worker count once (what the data-wait advice rests on). Runs in
    the loop's `next()`: it must never raise into it."""
    global _workers
    try:
        n = getattr(it, "_num_workers", None)
        _workers = n if isinstance(n, int) and not isinstance(n, bool) else -1
        sender = get_sender()
        if sender is not None and _workers >= 0:
            note = "num_workers of the first training DataLoader"
            d = FACT.build(key="dataloader_workers", value=n, source="detected", note=note)
            sender.send(FACT.name, d)
    except Exception:  # noqa: BLE001 - promise: nothing raises into the training loop
        _workers = -1


def attach_data(torch: Any) -> None:
    from torch.utils.data import dataloader

    cls = dataloader._BaseDataLoaderIter
    if not hasattr(cls.__next__, "__trainmeter_original__"):
        cls.__next__ = _wrap_next(cls.__next__)


# ---- checkpoint ----------------------------------------------------------------------------


def _wrap_save(original: Any) -> Any:
    if hasattr(original, "__trainmeter_original__"):
        return original

    @functools.wraps(original)
    def save(*args: Any, **kwargs: Any) -> Any:
        global _saving
        if _saving:
            return original(*args, **kwargs)
        _saving += 1
        t0 = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            _saving -= 1
            add("checkpoint", time.perf_counter() - t0)

    save.__trainmeter_original__ = original  # type: ignore[attr-defined]
    return save


def _patch(owner: Any, attr: str) -> None:
    original = getattr(owner, attr, None)
    if callable(original):
        setattr(owner, attr, _wrap_save(original))


def _patch_transformers(module: Any) -> None:
    cls = getattr(module, "PreTrainedModel", None)
    if cls is not None:
        _patch(cls, "save_pretrained")


def _patch_safetensors(module: Any) -> None:
    _patch(module, "save_file")
    _patch(module, "save_model")


def attach_checkpoint(torch: Any) -> None:
    wrapped = _wrap_save(torch.save)
    torch.save = wrapped
    torch.serialization.save = wrapped
    importhook.when_imported("transformers.modeling_utils", _guarded(_patch_transformers))
    importhook.when_imported("safetensors.torch", _guarded(_patch_safetensors))
    importhook.when_imported("torch.distributed.checkpoint", _guarded(_patch_dcp))


def _patch_dcp(module: Any) -> None:
    """`torch.distributed.checkpoint.save` (TorchTitan, FSDP2); `async_save` blocks only
    while it stages, and that is the part timed."""
    _patch(module, "save")
    _patch(module, "async_save")


def _guarded(patch: Any) -> Any:
    def run(module: Any) -> None:
        try:
            patch(module)
        except Exception as exc:  # noqa: BLE001 - promise 1: only this patch is lost
            guard.off("checkpoint", exc)

    return run


# ---- eval ----------------------------------------------------------------------------------


def _wrap_train(original: Any) -> Any:
    @functools.wraps(original)
    def train(self: Any, mode: bool = True) -> Any:
        # `train()` recurses into every submodule, and loops such as HF Trainer call
        # `model.train()` every step: only a real switch (into eval, or out of an open eval
        # span) with a bool mode looks any further than this one comparison
        if (
            mode is (_eval_since is not None)
            and not _held
            and (self is steps.root() or self in _family())
        ):
            try:
                _switch(mode)
            except Exception as exc:  # noqa: BLE001 - promise 1
                guard.off("eval", exc)
        return original(self, mode)

    train.__trainmeter_original__ = original  # type: ignore[attr-defined]
    return train


_family_of: list[Any] = [None, ()]


def _family() -> tuple[Any, ...]:
    """The root and the modules it wraps (a user may call `model.module.eval()`)."""
    root = steps.root()
    if root is None:
        return ()
    if _family_of[0] is not root:
        from .model import unwrap_chain

        _family_of[0], _family_of[1] = root, tuple(unwrap_chain(root))
    return _family_of[1]


def _switch(training: bool) -> None:
    global _eval_since
    if not training and _eval_since is None:
        _eval_since = time.perf_counter()
    elif training and _eval_since is not None:
        add("eval", time.perf_counter() - _eval_since)
        _eval_since = None


def begin_eval_span() -> None:
    """A loop's evaluation starts (a tap calls this where the loop starts validating)."""
    global _held
    _held += 1
    _switch(False)


def end_eval_span() -> None:
    """The evaluation `begin_eval_span` opened is over: its time is added to `eval`."""
    global _held
    if _held:
        _held -= 1
        if not _held:
            _switch(True)


def attach_eval(torch: Any) -> None:
    cls = torch.nn.Module
    if not hasattr(cls.train, "__trainmeter_original__"):
        cls.train = _wrap_train(cls.train)


def attach(torch: Any) -> list[str]:
    """Install each phase probe on its own; one that fails is simply not listed."""
    names = []
    for name, install in (
        ("dataloader", attach_data),
        ("checkpoint", attach_checkpoint),
        ("eval", attach_eval),
    ):
        try:
            install(torch)
            names.append(name)
        except Exception as exc:  # noqa: BLE001 - promise 1
            guard.off(name, exc)
    if names:
        sender = get_sender()
        if sender is not None:
            sender.add_drain(drain)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_forked)
    return names


def _forked() -> None:
    """A forked child: the phases its parent measured and had not sent yet are the parent's to
    send (a DataLoader worker that flushes at its exit must not send them again)."""
    global _mark, _mark_sent, _sent
    _sent = {name: (e[0], e[1]) for name, e in _totals.items()}
    _mark = _mark_sent = None
