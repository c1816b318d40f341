"""The MLflow tap: `mlflow.log_metric`, `mlflow.log_metrics` and `MlflowClient.log_metric`.

The fluent `mlflow.log_metric` itself calls `MlflowClient().log_metric`; the shared "inside a
tracker" flag in `_base` makes that one value, not two. Both the `mlflow` module's names and the
`mlflow.tracking.fluent` ones are wrapped, since people import from either.
"""

from __future__ import annotations

import sys
from types import ModuleType

from ..importhook import when_imported
from ._base import Tap, arg, step_or_current

TYPE_CHECKING = False  # typing costs ~9 ms in every Python the run starts
if TYPE_CHECKING:
    from typing import Any

NAME = "mlflow"
TAP = Tap(NAME)


def _observe_metric(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    TAP.record(
        arg(args, kwargs, 0, "key"),
        arg(args, kwargs, 1, "value"),
        step_or_current(arg(args, kwargs, 2, "step")),
    )


def _observe_metrics(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    metrics = arg(args, kwargs, 0, "metrics")
    if isinstance(metrics, dict):
        TAP.record_all(metrics.items(), step_or_current(arg(args, kwargs, 1, "step")))


def _observe_client_metric(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    # MlflowClient.log_metric(self, run_id, key, value, timestamp=None, step=None, ...)
    TAP.record(
        arg(args, kwargs, 2, "key"),
        arg(args, kwargs, 3, "value"),
        step_or_current(arg(args, kwargs, 5, "step")),
    )


def _attach(module: ModuleType) -> None:
    fluent = sys.modules.get("mlflow.tracking.fluent")
    for owner in (module, fluent):
        if owner is None:
            continue
        TAP.wrap(owner, "log_metric", _observe_metric)
        TAP.wrap(owner, "log_metrics", _observe_metrics)
    client = getattr(module, "MlflowClient", None)
    if isinstance(client, type):
        TAP.wrap(client, "log_metric", _observe_client_metric)


def install() -> None:
    when_imported("mlflow", _attach)
