"""The accelerator this process trains on, when CUDA is already initialized by the user.

`torch.cuda.is_initialized()` is checked first, so this probe never creates a CUDA context
(promise 1: `tm` and its agent never do). It looks at torch attach time, at the first training
forward and after the first step, and sends the `device` fact once.
"""

from __future__ import annotations

from typing import Any

from ...payloads import FACT
from ..sender import get_sender
from . import steps

_torch: Any = None
_sent = False
_index: int | None = None


def index() -> int | None:
    """The CUDA index this process trains on, once detected (the memory probe reads it from
    the sender thread, whose current device is not the training thread's)."""
    return _index


def _cuda_index(*tensors: Any) -> int | None:
    """The CUDA device a tensor lives on (metadata only), for a model moved with
    `.to("cuda:3")` while the current device is still 0."""
    for tensor in tensors:
        dev = getattr(tensor, "device", None)
        if getattr(dev, "type", None) == "cuda" and isinstance(getattr(dev, "index", None), int):
            return dev.index
    return None


def look(index: int | None = None) -> bool:
    """Send {name, index, uuid} of the training CUDA device (`index`, else the current one) if
    CUDA is up; True once sent."""
    global _sent, _index
    if _sent:
        return True
    cuda = _torch.cuda
    if not cuda.is_initialized():
        return False
    if index is None:
        index = int(cuda.current_device())
    props = cuda.get_device_properties(index)
    uuid = getattr(props, "uuid", None)
    value = {"name": str(props.name), "index": index, "uuid": None if uuid is None else str(uuid)}
    if value["uuid"] and not value["uuid"].startswith(("GPU-", "MIG-")):
        value["uuid"] = "GPU-" + value["uuid"]  # NVML spells it with the prefix
    sender = get_sender()
    if sender is not None:
        sender.send(
            FACT.name, FACT.build(key="device", value=value, source="detected", note="torch.cuda")
        )
    _sent = True
    _index = index
    return True


def _first_param(root: Any) -> Any:
    return next(iter(root.parameters()), None) if root is not None else None


def _on_first_forward(root: Any, tokens: Any, args: Any, kwargs: Any) -> None:
    look(_cuda_index(tokens, _first_param(root)))


def _on_step(n: int) -> None:
    if look(_cuda_index(_first_param(steps.root()))) or n >= 1:
        steps.step_listeners.remove(_on_step)


_on_first_forward.probe = _on_step.probe = "device"  # type: ignore[attr-defined]


def attach(torch: Any) -> list[str]:
    global _torch
    _torch = torch
    look()
    steps.first_forward.append(_on_first_forward)
    steps.step_listeners.append(_on_step)
    return ["device"]
