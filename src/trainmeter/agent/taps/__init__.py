"""Taps: pick up the values a training loop already logs to its tracker.

`install_all()` registers one import hook per tap and returns the tap names. Nothing is imported
here: each tap attaches only when the user's own code imports its tracker (wandb, TensorBoard,
MLflow, transformers, Lightning), so a run that uses none of them pays nothing.
"""

from __future__ import annotations

import os

from . import lightning, mlflow, tensorboard, transformers, wandb
from ._base import Tap

_MODULES = (wandb, tensorboard, mlflow, transformers, lightning)
NO_TAP_ENV = "TRAINMETER_NO_TAP"


def taps() -> list[Tap]:
    """Every tap, installed or not."""
    return [module.TAP for module in _MODULES]


def install_all() -> list[str]:
    """Register every tap's import hook; the names of those registered (none with --no-tap)."""
    if os.environ.get(NO_TAP_ENV) == "1":
        return []
    names: list[str] = []
    for module in _MODULES:
        try:
            module.install()
        except Exception as exc:  # noqa: BLE001 - invariant 1: one tap failing is that tap's
            module.TAP.fail(exc)
            continue
        names.append(module.NAME)
    return names


def uninstall_all() -> None:
    """Put back every wrapped call (tests; a process that wants trainmeter out of its way)."""
    for tap in taps():
        tap.unwrap()
