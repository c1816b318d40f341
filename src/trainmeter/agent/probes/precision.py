"""The precision the model's matmuls run in, read once at its first training forward.

Why: MFU is defined against the dense BF16 peak, so an FP32 run reads like a slow BF16 run and
an FP8 run like a fast one, unless the precision is said beside it. The first forward runs inside
the user's autocast context (the probe is called from the root module's forward hook), so the
autocast state read there is the one the matmuls see. Only flags, module types and dtypes are
read; torch's own warnings about its older TF32 flags are kept from the user's output.

The order, first match wins: FP8 layers (Transformer Engine modules under an enabled FP8
autocast, or torchao `Float8Linear`), then autocast's dtype, then the dtype of the weights; an
FP32 run on a GPU is TF32 when torch's TF32 matmul flags allow it.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

from ...payloads import FACT
from ..sender import get_sender
from . import steps

_torch: Any = None

NAMES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def _dtype_name(dtype: Any) -> str:
    return NAMES.get(str(dtype).rpartition(".")[2], str(dtype).rpartition(".")[2])


def _fp8(root: Any) -> str | None:
    """Where FP8 matmuls come from, or None."""
    te_layers = False
    for module in root.modules():
        cls = type(module)
        if cls.__name__ == "Float8Linear" and cls.__module__.startswith("torchao"):
            return "torchao Float8Linear layers"
        if cls.__module__.startswith("transformer_engine"):
            te_layers = True
    if te_layers:
        fp8 = sys.modules.get("transformer_engine.pytorch.fp8")
        manager = getattr(fp8, "FP8GlobalStateManager", None)
        try:
            if manager is not None and manager.is_fp8_enabled():
                return "Transformer Engine layers under fp8_autocast"
        except Exception:  # noqa: BLE001 - another Transformer Engine version: not FP8 then
            return None
    return None


def _weights_dtype(root: Any) -> Any:
    """The dtype of the first matrix weight (norm gains may be kept in FP32)."""
    for p in root.parameters():
        if p.dim() >= 2:
            return p.dtype, p.device.type
    return None, "cpu"


def _tf32() -> bool:
    """Whether torch lets FP32 CUDA matmuls run as TF32."""
    matmul = _torch.backends.cuda.matmul
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if getattr(matmul, "fp32_precision", None) == "tf32":
            return True
        if getattr(matmul, "allow_tf32", False):
            return True
        return _torch.get_float32_matmul_precision() in ("high", "medium")


def detect(root: Any) -> tuple[str, str]:
    """(precision: fp8, bf16, fp16, tf32 or fp32; how it was read)."""
    where = _fp8(root)
    if where is not None:
        return "fp8", where
    dtype, device = _weights_dtype(root)
    if _torch.is_autocast_enabled(device):
        auto = _torch.get_autocast_dtype(device)
        return _dtype_name(auto), f"autocast on {device} to {auto}"
    name = _dtype_name(dtype) if dtype is not None else "fp32"
    if name == "fp32" and device == "cuda" and _tf32():
        return "tf32", "FP32 weights, TF32 matmuls allowed (torch.backends.cuda.matmul)"
    return name, f"weights in {dtype}, no autocast"


def on_first_forward(root: Any, tokens: Any, args: Any, kwargs: Any) -> None:
    precision, how = detect(root)
    sender = get_sender()
    if sender is not None:
        sender.send(
            FACT.name,
            FACT.build(key="matmul_precision", value=precision, source="detected", note=how),
        )


on_first_forward.probe = "precision"  # type: ignore[attr-defined]


def attach(torch: Any) -> list[str]:
    global _torch
    _torch = torch
    steps.first_forward.append(on_first_forward)
    return ["precision"]
