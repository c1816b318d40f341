"""The Hugging Face tap: `Trainer.log(logs, start_time=None)`.

Everything a `Trainer` reports goes through `log` (loss, learning_rate, grad_norm, eval_loss...),
and its integrations (wandb, TensorBoard, MLflow callbacks) are called from inside it, so they are
not counted a second time. The step is the trainer's `state.global_step`.

One exception: the summary a `Trainer` logs when training ends (it has `train_runtime`) carries a
`train_loss` that is the mean over the whole run, not a point of the curve; sent as is it would
land on the curve as a last point that was never a loss of any step. It is left out; the rest of
that summary (runtime, `total_flos`) goes through.
"""

from __future__ import annotations

from types import ModuleType

from ..importhook import when_imported
from ._base import Tap, arg, step_or_current

TYPE_CHECKING = False  # typing costs ~9 ms in every Python the run starts
if TYPE_CHECKING:
    from typing import Any

NAME = "transformers"
TAP = Tap(NAME)
MODULE = "transformers.trainer"
RUN_MEAN_KEYS = frozenset({"train_loss"})


def _observe(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    trainer = args[0] if args else None
    logs = arg(args, kwargs, 1, "logs")
    if not isinstance(logs, dict):
        return
    state = getattr(trainer, "state", None)
    step = step_or_current(getattr(state, "global_step", None))
    end_summary = "train_runtime" in logs
    TAP.record_all(
        ((k, v) for k, v in logs.items() if not (end_summary and k in RUN_MEAN_KEYS)), step
    )


def _attach(module: ModuleType) -> None:
    TAP.wrap(module.Trainer, "log", _observe)


def install() -> None:
    when_imported(MODULE, _attach)
