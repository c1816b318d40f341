"""Taps: pick up the values a training loop already logs to its tracker.

`install_all()` registers one import hook per tap and returns the names of the taps it *armed*.
Nothing is imported here: each tap attaches only when the user's own code imports its tracker
(wandb, TensorBoard, MLflow, transformers, Lightning), so a run that uses none of them pays
nothing. A tap joins `STATE.probes` (and so `hello`'s `probes`) only when it attached; then
`on_attach(name)` is called, which boot uses to say `hello` again.
"""

from __future__ import annotations

from . import _base, lightning, mlflow, tensorboard, transformers, wandb
from ._base import Tap

TYPE_CHECKING = False  # collections.abc imports collections: ~1 ms in every Python the run starts
if TYPE_CHECKING:
    from collections.abc import Callable

_MODULES = (wandb, tensorboard, mlflow, transformers, lightning)


def taps() -> list[Tap]:
    """Every tap, installed or not."""
    return [module.TAP for module in _MODULES]


def install_all(on_attach: Callable[[str], None] | None = None) -> list[str]:
    """Register every tap's import hook; the names of those armed. `on_attach(name)` is called
    when a tap attaches (its tracker imported and wrapped). Whether taps are wanted at all
    (`tm --no-tap`) is decided once, by `boot.taps_wanted()`, before this is called."""
    if on_attach is not None:
        _base.on_attach = on_attach
    names: list[str] = []
    for module in _MODULES:
        try:
            module.install()
        except Exception as exc:  # noqa: BLE001 - promise 1: one tap failing is that tap's
            module.TAP.fail(exc)
            continue
        names.append(module.NAME)
    return names


def uninstall_all() -> None:
    """Put back every wrapped call (tests; a process that wants trainmeter out of its way)."""
    for tap in taps():
        tap.unwrap()
