"""The TensorBoard tap: `SummaryWriter.add_scalar` and `add_scalars`.

Both writers people use are covered: `torch.utils.tensorboard` and `tensorboardX`, each only once
the user imports it. `add_scalars(main_tag, {tag: value})` names its series `main_tag/tag`, the
way TensorBoard's own UI shows them grouped.
"""

from __future__ import annotations

from types import ModuleType

from ..importhook import when_imported
from ._base import Tap, arg, step_or_current

TYPE_CHECKING = False  # typing costs ~9 ms in every Python the run starts
if TYPE_CHECKING:
    from typing import Any

NAME = "tensorboard"
TAP = Tap(NAME)
MODULES = ("torch.utils.tensorboard.writer", "tensorboardX.writer")


def _observe_scalar(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    tag = arg(args, kwargs, 1, "tag")
    value = arg(args, kwargs, 2, "scalar_value")
    TAP.record(tag, value, step_or_current(arg(args, kwargs, 3, "global_step")))


def _observe_scalars(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    main_tag = arg(args, kwargs, 1, "main_tag")
    values = arg(args, kwargs, 2, "tag_scalar_dict")
    if isinstance(values, dict):
        step = step_or_current(arg(args, kwargs, 3, "global_step"))
        TAP.record_all(((f"{main_tag}/{tag}", value) for tag, value in values.items()), step)


def _attach(module: ModuleType) -> None:
    writer = module.SummaryWriter
    TAP.wrap(writer, "add_scalar", _observe_scalar)
    TAP.wrap(writer, "add_scalars", _observe_scalars)


def install() -> None:
    for name in MODULES:
        when_imported(name, _attach)
