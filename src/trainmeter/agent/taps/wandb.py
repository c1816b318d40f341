"""The wandb tap: `Run.log(data, step=None, commit=None)`, which `wandb.log` also goes through.

`wandb.log` is bound to the active run's `log` at `wandb.init`, so wrapping the class method
before any run exists catches both spellings. Only the top-level numbers of `data` are read;
images, tables and histograms are the tracker's business.
"""

from __future__ import annotations

from types import ModuleType

from ..importhook import when_imported
from ._base import Tap, arg, step_or_current

TYPE_CHECKING = False  # typing costs ~9 ms in every Python the run starts
if TYPE_CHECKING:
    from typing import Any

NAME = "wandb"
TAP = Tap(NAME)
MODULE = "wandb.sdk.wandb_run"


def _observe(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    data = arg(args, kwargs, 1, "data")
    if isinstance(data, dict):
        TAP.record_all(data.items(), step_or_current(arg(args, kwargs, 2, "step")))


def _attach(module: ModuleType) -> None:
    TAP.wrap(module.Run, "log", _observe)


def install() -> None:
    when_imported(MODULE, _attach)
