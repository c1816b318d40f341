"""Which tensor of a root forward call holds the tokens, and how many of them are not padding.

Only metadata (`dim`, `dtype`, `shape`, `numel`, `device`) is read from the token tensor itself.
Counting real tokens needs values, so it happens only for CPU tensors: summing a CUDA mask would
make the host wait for the device (a synchronization) and allocate the result on the GPU, which
promise 1 forbids. On an accelerator `real_tokens` is simply left out of the step record.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs milliseconds in every Python the run starts
if TYPE_CHECKING:
    from typing import Any

#: Keyword arguments that are 2-D integer tensors but never the tokens themselves.
_NOT_TOKENS = frozenset(
    {"attention_mask", "labels", "position_ids", "token_type_ids", "loss_mask", "segment_ids"}
)
IGNORE_INDEX = -100

#: The token tensor's batch axis: 1 once the model probe saw it is sequence-first, `(T, B)`
#: (its first attention or recurrent layer was fed T where the token tensor has its first axis).
batch_axis = 0

_tensor_type: Any = None
_int_dtypes: frozenset[Any] = frozenset()


def bind(torch: Any) -> None:
    """Remember torch's Tensor class and integer dtypes (called once torch is imported)."""
    global _tensor_type, _int_dtypes
    _tensor_type = torch.Tensor
    names = ("int64", "int32", "int16", "uint16", "uint32")
    _int_dtypes = frozenset(getattr(torch, n) for n in names if hasattr(torch, n))


def never_tokens(dtype: Any) -> bool:
    """Whether no tensor of this dtype is ever taken for the tokens (not an integer dtype)."""
    return dtype not in _int_dtypes


def _is_tokens(x: Any) -> bool:
    return isinstance(x, _tensor_type) and x.dim() == 2 and x.dtype in _int_dtypes


def find(args: tuple[Any, ...], kwargs: dict[str, Any] | None) -> Any:
    """The token tensor of a forward call: `input_ids=`, else the first 2-D integer tensor
    among the positional arguments, else among the other keyword arguments; or None."""
    if kwargs:
        ids = kwargs.get("input_ids")
        if ids is not None and _is_tokens(ids):
            return ids
    for arg in args:
        if _is_tokens(arg):
            return arg
    if kwargs:
        for name, value in kwargs.items():
            if name not in _NOT_TOKENS and _is_tokens(value):
                return value
    return None


def real(tokens: Any, kwargs: dict[str, Any] | None) -> int | None:
    """Tokens that are not padding, from `attention_mask` (its sum) or `labels` (entries not
    equal to -100), when that tensor has the tokens' shape and lives on the CPU; else None."""
    if not kwargs:
        return None
    mask = kwargs.get("attention_mask")
    if isinstance(mask, _tensor_type) and mask.shape == tokens.shape:
        if mask.device.type != "cpu":
            return None
        return int(mask.sum())
    labels = kwargs.get("labels")
    if isinstance(labels, _tensor_type) and labels.shape == tokens.shape:
        if labels.device.type != "cpu":
            return None
        return int((labels != IGNORE_INDEX).sum())
    return None


def first_tensor(args: tuple[Any, ...], kwargs: dict[str, Any] | None) -> Any:
    """The first tensor among the positional arguments (or inside a dict, list or tuple given
    as one), else among the keyword arguments; None when there is none."""
    for arg in (*args, *(kwargs or {}).values()):
        items = (
            arg.values()
            if isinstance(arg, dict)
            else arg
            if isinstance(arg, (list, tuple))
            else (arg,)
        )
        for x in items:
            if isinstance(x, _tensor_type):
                return x
    return None
