"""Canonical series names, and the loop's own names that map onto them.

Loops call the same curve `loss`, `train/loss`, `training_loss` or `train_loss`; a view wants
one `train_loss`. A bare `loss` is the training loss only until the loop also logs an explicit
training key, because some loops log `loss` for eval too.
"""

from __future__ import annotations

CANONICAL = ("train_loss", "val_loss", "lr", "grad_norm")

#: A key that means the training loss only when nothing more explicit is logged.
BARE_LOSS = "loss"

_ALIASES: dict[str, tuple[str, ...]] = {
    "train_loss": (
        "train_loss",
        "train/loss",
        "training_loss",
        "training/loss",
        "loss/train",
        "train/loss_step",
        "train_loss_step",
        "trainer/loss",
    ),
    "val_loss": (
        "val_loss",
        "val/loss",
        "eval_loss",
        "eval/loss",
        "valid_loss",
        "valid/loss",
        "validation_loss",
        "validation/loss",
        "loss/val",
        "loss/eval",
        "test_loss",
    ),
    "lr": (
        "lr",
        "learning_rate",
        "train/lr",
        "train/learning_rate",
        "lr-adamw",
        "lr-adam",
        "lr-sgd",
        "optim/lr",
    ),
    "grad_norm": (
        "grad_norm",
        "gradient_norm",
        "train/grad_norm",
        "grad-norm",
        "grad_norm/total",
        "optim/grad_norm",
    ),
}

_BY_ALIAS: dict[str, str] = {
    alias.casefold(): name for name, aliases in _ALIASES.items() for alias in aliases
}


def canonical(key: str) -> str | None:
    """The canonical name `key` stands for, or None (a bare `loss` is decided by the caller)."""
    return _BY_ALIAS.get(key.casefold())
