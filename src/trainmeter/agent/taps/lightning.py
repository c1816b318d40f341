"""The PyTorch Lightning tap: `LightningModule.log(name, value, ...)`.

`log_dict` calls `log` for each entry, so one wrapper sees both. Lightning's own loggers write
what `self.log` collected later, from `LoggerConnector.log_metrics`; that call is wrapped as
"inside a tracker" only, so the TensorBoard/wandb/MLflow loggers under it do not send the same
loss again. Both package names are covered: `lightning.pytorch` and `pytorch_lightning`.
"""

from __future__ import annotations

from types import ModuleType

from ..importhook import when_imported
from ._base import Tap, arg, step_or_current

TYPE_CHECKING = False  # typing costs ~9 ms in every Python the run starts
if TYPE_CHECKING:
    from typing import Any

NAME = "lightning"
TAP = Tap(NAME)
PACKAGES = ("lightning.pytorch", "pytorch_lightning")
_CONNECTOR = "trainer.connectors.logger_connector.logger_connector"


def _observe(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    # Lightning's `log` takes no step: the optimizer steps the agent counted stand in.
    TAP.record(arg(args, kwargs, 1, "name"), arg(args, kwargs, 2, "value"), step_or_current(None))


def _attach_module(module: ModuleType) -> None:
    TAP.wrap(module.LightningModule, "log", _observe)


def _attach_connector(module: ModuleType) -> None:
    # `_LoggerConnector` in Lightning 2.x, `LoggerConnector` before
    connector = getattr(module, "_LoggerConnector", None) or module.LoggerConnector
    TAP.wrap(connector, "log_metrics", None)


def install() -> None:
    for package in PACKAGES:
        when_imported(f"{package}.core.module", _attach_module)
        when_imported(f"{package}.{_CONNECTOR}", _attach_connector)
