"""trainmeter: where a training run's FLOPs and wall time go, with no change to the code.

Run `tm train.py` instead of `python train.py`. The one optional line in a loop is
`from trainmeter import emit; emit(train_loss=loss.item())`.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .emit import emit  # noqa: E402

__all__ = ["__version__", "emit"]
