"""The PyTorch Lightning tap: the values Lightning hands its own loggers, and its eval spans.

`self.log(name, value)` only *collects* a value: Lightning reduces what was collected (a
validation `val_loss` logged per batch becomes the epoch mean) and hands the result to its
loggers in one call, `LoggerConnector.log_metrics(metrics, step)`, made whether or not a logger
is configured. That call is the one read, so each series is exactly what TensorBoard, wandb or
CSV receive, at the cadence they receive it (`log_every_n_steps`). It also marks the loggers it
calls as "inside a tracker", so their own TensorBoard/wandb/MLflow calls are not counted again.

Lightning switches to eval mode with `model.eval()` but back by setting each module's
`.training` flag (`_ModuleMode.restore`), which the eval probe's `train()` wrapper never sees;
so the validation loop's `run` is wrapped to open and close the eval span itself.

Both package names are covered: `lightning.pytorch` and `pytorch_lightning`.
"""

from __future__ import annotations

import functools
from types import ModuleType

from ..importhook import when_imported
from ..probes import phases
from ._base import MARK, Tap, arg, step_or_current

TYPE_CHECKING = False  # typing costs ~9 ms in every Python the run starts
if TYPE_CHECKING:
    from typing import Any

NAME = "lightning"
TAP = Tap(NAME)
PACKAGES = ("lightning.pytorch", "pytorch_lightning")
_CONNECTOR = "trainer.connectors.logger_connector.logger_connector"
_EVAL_LOOP = "loops.evaluation_loop"
_SKIP = ("step", "epoch")  # Lightning's own bookkeeping keys, not the loop's values


def _observe(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    metrics = arg(args, kwargs, 1, "metrics")
    if not metrics:
        return
    step = arg(args, kwargs, 2, "step")
    if step is None:
        step = metrics.get("step")  # Lightning takes a logged "step" as the step
    step = step_or_current(step)
    TAP.record_all(((k, v) for k, v in metrics.items() if k not in _SKIP), step)


def _attach_connector(module: ModuleType) -> None:
    # `_LoggerConnector` in Lightning 2.x, `LoggerConnector` before
    connector = getattr(module, "_LoggerConnector", None) or module.LoggerConnector
    TAP.wrap(connector, "log_metrics", _observe)


def _span(original: Any) -> Any:
    @functools.wraps(original)
    def run(*args: Any, **kwargs: Any) -> Any:
        opened = False
        if TAP.enabled:
            try:
                phases.begin_eval_span()
                opened = True
            except Exception as exc:  # noqa: BLE001 - promise 1: the loop goes on
                TAP.fail(exc)
        try:
            return original(*args, **kwargs)
        finally:
            if opened:
                try:
                    phases.end_eval_span()
                except Exception as exc:  # noqa: BLE001 - promise 1
                    TAP.fail(exc)

    setattr(run, MARK, NAME)
    return run


def _attach_eval_loop(module: ModuleType) -> None:
    loop = getattr(module, "_EvaluationLoop", None) or getattr(module, "EvaluationLoop", None)
    original = getattr(loop, "__dict__", {}).get("run")
    if original is None or getattr(original, MARK, None):
        return
    loop.run = _span(original)
    TAP.patched.append((loop, "run", original, True))


def install() -> None:
    for package in PACKAGES:
        when_imported(f"{package}.{_CONNECTOR}", _attach_connector)
        when_imported(f"{package}.{_EVAL_LOOP}", _attach_eval_loop)
