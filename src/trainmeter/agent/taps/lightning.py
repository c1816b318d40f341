"""The PyTorch Lightning tap: the values Lightning hands its own loggers, and its eval spans.

`self.log(name, value)` only *collects* a value: Lightning reduces what was collected (a
validation `val_loss` logged per batch becomes the epoch mean) and hands the result to its
loggers in one call, `LoggerConnector.log_metrics(metrics, step)`, made whether or not a logger
is configured. That call is the one read, so each series is exactly what TensorBoard, wandb or
CSV receive, at the cadence they receive it (`log_every_n_steps`). The values are the floats
Lightning itself converts for its loggers (`convert_tensors_to_scalars` in that module, spied
on): a loss on the GPU is read after Lightning's own sync, never by one of ours. With no logger
Lightning converts nothing, and the values are read as they are (CPU ones only). The call also
marks the loggers as "inside a tracker", so their own TensorBoard/wandb/MLflow calls are not
counted again.

Lightning switches to eval mode with `model.eval()` but back by setting each module's
`.training` flag (`_ModuleMode.restore`), which the eval probe's `train()` wrapper never sees;
so the validation (and test, and predict) loop's `run` is wrapped to open and close the eval
span itself.

Both package names are covered: `lightning.pytorch` and `pytorch_lightning`.
"""

from __future__ import annotations

import _thread  # not threading: see sender.py
from types import ModuleType

from ..importhook import when_imported
from . import _base
from ._base import MARK, Tap, arg, step_or_current

TYPE_CHECKING = False  # typing costs ~9 ms in every Python the run starts
if TYPE_CHECKING:
    from typing import Any

NAME = "lightning"
TAP = Tap(NAME)
PACKAGES = ("lightning.pytorch", "pytorch_lightning")
_CONNECTOR = "trainer.connectors.logger_connector.logger_connector"
_EVAL_LOOP = "loops.evaluation_loop"
_PREDICT_LOOP = "loops.prediction_loop"
_SKIP = ("step", "epoch")  # Lightning's own bookkeeping keys, not the loop's values


_seen = _thread._local()  # threading.local; .watching / .floats: inside one `log_metrics` call


def _spy_convert(original: Any) -> Any:
    """`convert_tensors_to_scalars` as the connector calls it: Lightning turns the metrics
    into floats for its loggers (its own device sync, made anyway); those floats are kept."""
    import functools  # here, once Lightning is imported: not in every Python the run starts

    @functools.wraps(original)
    def convert(*args: Any, **kwargs: Any) -> Any:
        out = original(*args, **kwargs)
        if getattr(_seen, "watching", False):
            _seen.floats = out
        return out

    setattr(convert, MARK, NAME)
    return convert


def _record(args: tuple[Any, ...], kwargs: dict[str, Any], floats: Any) -> None:
    metrics = arg(args, kwargs, 1, "metrics")
    if not metrics:
        return
    step = arg(args, kwargs, 2, "step")
    if step is None:
        step = metrics.get("step")  # Lightning takes a logged "step" as the step
    step = step_or_current(step)
    # the floats Lightning made for its loggers; with no logger it converts nothing, and the
    # values are read as they are (host numbers and CPU tensors only: nothing is synced)
    values = floats if isinstance(floats, dict) else metrics
    TAP.record_all(((k, v) for k, v in values.items() if k not in _SKIP), step)


def _wrap_log_metrics(original: Any) -> Any:
    import functools

    @functools.wraps(original)
    def log_metrics(*args: Any, **kwargs: Any) -> Any:
        if getattr(_base._local, "inside", False):
            return original(*args, **kwargs)  # a tracker calling a tracker: counted already
        _seen.watching, _seen.floats = True, None
        _base._local.inside = True  # the loggers' own tracker calls are this call's values
        try:
            return original(*args, **kwargs)
        finally:
            _base._local.inside = False
            _seen.watching = False
            floats, _seen.floats = _seen.floats, None
            if TAP.enabled:
                try:
                    _record(args, kwargs, floats)
                except Exception as exc:  # noqa: BLE001 - promise 1: our failure is ours alone
                    TAP.fail(exc)

    setattr(log_metrics, MARK, NAME)
    return log_metrics


def _patch(owner: Any, attr: str, make: Any) -> None:
    original = owner.__dict__.get(attr) if isinstance(owner, type) else getattr(owner, attr, None)
    if original is None or getattr(original, MARK, None):
        return
    setattr(owner, attr, make(original))
    TAP.patched.append((owner, attr, original, True))
    _base._announce(NAME)


def _attach_connector(module: ModuleType) -> None:
    # `_LoggerConnector` in Lightning 2.x, `LoggerConnector` before
    connector = getattr(module, "_LoggerConnector", None) or module.LoggerConnector
    _patch(connector, "log_metrics", _wrap_log_metrics)
    if callable(getattr(module, "convert_tensors_to_scalars", None)):
        _patch(module, "convert_tensors_to_scalars", _spy_convert)


def _span(original: Any) -> Any:
    # the phases probe (and the step probe under it) are imported with Lightning's loops, not
    # at the start of every Python `tm` starts
    import functools

    from ..probes import phases

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
    # validation and test (`_EvaluationLoop`), and prediction (`_PredictionLoop`): each
    # restores train mode by flag, and none of it is training time
    for name in ("_EvaluationLoop", "EvaluationLoop", "_PredictionLoop", "PredictionLoop"):
        loop = getattr(module, name, None)
        if isinstance(loop, type):
            _patch(loop, "run", _span)
            return


def install() -> None:
    for package in PACKAGES:
        when_imported(f"{package}.{_CONNECTOR}", _attach_connector)
        when_imported(f"{package}.{_EVAL_LOOP}", _attach_eval_loop)
        when_imported(f"{package}.{_PREDICT_LOOP}", _attach_eval_loop)
