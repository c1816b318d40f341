"""The precision probe on real modules: weights' dtype, autocast, TF32 flags, FP8 layers."""

from __future__ import annotations

import sys
import types

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from trainmeter.agent.probes import precision  # noqa: E402

precision._torch = torch


def net() -> nn.Module:
    return nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8), nn.Linear(8, 4))


def test_fp32_weights_without_autocast_are_fp32_on_the_cpu():
    assert precision.detect(net())[0] == "fp32"


def test_bf16_weights_and_autocast():
    assert precision.detect(net().to(torch.bfloat16)) == (
        "bf16", "weights in torch.bfloat16, no autocast",
    )
    with torch.autocast("cpu", dtype=torch.bfloat16):
        name, how = precision.detect(net())
    assert name == "bf16" and how.startswith("autocast on cpu")
    with torch.autocast("cpu", dtype=torch.float16):
        assert precision.detect(net())[0] == "fp16"


def test_tf32_flags_are_read_and_left_as_they_were():
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("highest")
        assert precision._tf32() is False
        torch.set_float32_matmul_precision("high")
        assert precision._tf32() is True
    finally:
        torch.set_float32_matmul_precision(before)
    assert torch.get_float32_matmul_precision() == before


def test_torchao_float8_layers_are_fp8():
    convert = pytest.importorskip("torchao.float8").convert_to_float8_training
    model = net()
    convert(model)
    assert precision.detect(model) == ("fp8", "torchao Float8Linear layers")


def test_transformer_engine_layers_count_only_under_fp8_autocast(monkeypatch):
    # Transformer Engine needs CUDA to install; its module path and its FP8 state manager are
    # what the probe reads, so a layer class from that path and the manager stand in for it.
    state = {"on": False}
    fp8 = types.ModuleType("transformer_engine.pytorch.fp8")
    fp8.FP8GlobalStateManager = types.SimpleNamespace(is_fp8_enabled=lambda: state["on"])
    monkeypatch.setitem(sys.modules, "transformer_engine.pytorch.fp8", fp8)
    te_linear = type("Linear", (nn.Linear,), {"__module__": "transformer_engine.pytorch.module"})
    model = nn.Sequential(te_linear(8, 8))
    assert precision.detect(model)[0] == "fp32"
    state["on"] = True
    assert precision.detect(model) == ("fp8", "Transformer Engine layers under fp8_autocast")
