"""trainmeter: where a training run's FLOPs and wall time go, with no change to the code.

Run `tm train.py` instead of `python train.py`. The one optional line in a loop is
`from trainmeter import emit; emit(train_loss=loss.item())`.
"""

from __future__ import annotations

import sys
import types

__version__ = "0.1.0"

__all__ = ["__version__", "emit"]


def __getattr__(name: str) -> object:
    """`emit` is imported on first use: `tm` itself imports this package on every start and
    needs none of the agent pieces `emit` brings (about 8 ms)."""
    if name == "emit":
        from .emit import emit as function  # the import sets the package's `emit` (`_Package`)

        return function
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _Package(types.ModuleType):
    """The package's `emit` is the function, also after `import trainmeter.emit`, which would
    otherwise set the package's attribute to the submodule of the same name."""

    def __setattr__(self, name: str, value: object) -> None:
        if name == "emit" and isinstance(value, types.ModuleType):
            value = value.emit  # type: ignore[attr-defined]
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
