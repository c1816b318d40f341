"""Reading a number the loop hands us, without ever touching an accelerator.

Shared by `emit` and the taps: both must take Python and NumPy numbers and 0-dim CPU tensors,
and must refuse a tensor on a GPU (reading it would synchronize the device).
"""

from __future__ import annotations

import numbers

TYPE_CHECKING = False  # typing costs ~9 ms at start-up in every Python the run starts
if TYPE_CHECKING:
    from typing import Any


def as_number(value: Any) -> float | None:
    """A float for Python and NumPy numbers and 0-dim CPU tensors, else None. Never syncs."""
    if isinstance(value, bool):
        return None
    if isinstance(value, numbers.Real):
        number = float(value)
    else:
        try:
            if getattr(value, "ndim", None) != 0:
                return None
            if getattr(getattr(value, "device", None), "type", None) != "cpu":
                return None  # never read a value off an accelerator: that would synchronize
            detach = getattr(value, "detach", None)
            number = float(detach() if detach is not None else value)
        except Exception:  # noqa: BLE001
            return None
    return number if number == number and number not in (float("inf"), float("-inf")) else None
