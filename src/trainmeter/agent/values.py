"""Reading a number the loop hands us, without ever touching an accelerator.

Shared by `emit` and the taps: both take Python and NumPy numbers, NumPy 0-d arrays and 0-dim
CPU tensors, and refuse a tensor on a GPU (reading it would synchronize the device). NumPy is
recognised by what its objects offer (`ndim`, `device`, `dtype`), never imported here.
"""

from __future__ import annotations

import numbers

TYPE_CHECKING = False  # typing costs ~9 ms at start-up in every Python the run starts
if TYPE_CHECKING:
    from typing import Any

_INF = float("inf")


def as_number(value: Any) -> float | None:
    """A finite float for Python and NumPy numbers, 0-d NumPy arrays and 0-dim CPU tensors;
    None for anything else (booleans, complex numbers, non-finite values, an int too large
    for a float, a tensor on an accelerator). Never raises, never syncs."""
    try:
        kind = type(value)
        if kind is float:
            number = value
        elif kind is int:
            number = float(value)  # OverflowError past 1.8e308: refused below
        elif kind is bool:
            return None
        elif isinstance(value, numbers.Real):  # NumPy scalars, Fraction, Decimal-like reals
            if getattr(getattr(value, "dtype", None), "kind", None) == "b":
                return None
            number = float(value)
        else:
            number = _zero_dim(value)
            if number is None:
                return None
    except Exception:  # noqa: BLE001 - whatever a strange object does, it is not a number
        return None
    return number if -_INF < number < _INF else None


def _zero_dim(value: Any) -> float | None:
    """The value of a 0-d array or tensor that lives on the CPU, else None."""
    if getattr(value, "ndim", None) != 0:
        return None
    device = getattr(value, "device", None)
    where = getattr(device, "type", device)  # torch: device.type; NumPy 2: the string "cpu"
    if where is None and type(value).__module__ == "numpy":
        where = "cpu"  # NumPy before 2.0 has no `device`: its arrays live on the host
    if where != "cpu":
        return None  # never read a value off an accelerator: that would synchronize
    dtype = getattr(value, "dtype", None)
    if getattr(dtype, "kind", None) in ("b", "c", "O", "U", "S", "V") or str(dtype) in (
        "torch.bool",
        "torch.complex64",
        "torch.complex128",
    ):
        return None
    detach = getattr(value, "detach", None)
    return float(detach() if detach is not None else value)
