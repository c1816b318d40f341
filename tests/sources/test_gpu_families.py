"""One door per device family: each library's failures are its own `GpuError` with its own
reasons, one module picks which door answers, and the engine looks a card's spec up once."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from tests.engine.build import H100, device, flat, gpu, gpu_row, hello, start, steps
from tests.engine.test_budget import SHAPE
from trainmeter.engine import Engine
from trainmeter.sources.gpu import GpuError, GpuSampler, NvmlError
from trainmeter.sources.gpu.amd import AmdsmiBackend, AmdSmiError
from trainmeter.sources.gpu.amd_fake import FakeAmdsmi
from trainmeter.sources.gpu.families import FAMILIES

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SRC = Path(__file__).resolve().parents[2] / "src" / "trainmeter"


def test_amd_failures_are_amd_smi_errors_with_amd_reasons():
    with pytest.raises(AmdSmiError) as err:
        AmdsmiBackend(FakeAmdsmi(FIXTURES / "amdsmi" / "no_driver.json")).init()
    assert isinstance(err.value, GpuError) and not isinstance(err.value, NvmlError)
    assert err.value.reason.startswith("AMD SMI could not start")
    # a permission error on one call: that field is absent, and the reason names AMD SMI
    pair = json.loads((FIXTURES / "amdsmi" / "mi300x_pair.json").read_text())
    calls = pair["devices"][0]["calls"]
    calls["amdsmi_get_power_info"] = [{"error": "AMDSMI_STATUS_NO_PERM"}]
    out = GpuSampler(AmdsmiBackend(FakeAmdsmi(pair)), env={}, gpus="0").sample()
    assert out["gpus"][0]["missing"]["power_w"] == "AMD SMI refused: insufficient permissions"
    assert AmdSmiError("InvalidArgument").reason == "AMD SMI error InvalidArgument"
    assert NvmlError("InvalidArgument").reason == "NVML error InvalidArgument"


def test_a_name_recorded_from_amd_reads_right_when_an_nvml_fixture_replays_it():
    # `tm hardware --dump` on an AMD machine writes AMD's names into the NVML fixture format
    assert NvmlError("AmdNotSupported").reason == "not supported by AMD SMI on this card"


def test_one_module_picks_the_door():
    """Only families.py builds a real door (record.py records NVML by name: its job)."""
    builders = {"PynvmlBackend", "AmdsmiBackend"}
    found = []
    for path in sorted((SRC).rglob("*.py")):
        text = path.read_text()
        if path.name in ("families.py", "record.py") or not any(b in text for b in builders):
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in builders:
                found.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert found == []
    assert [f.name for f in FAMILIES] == ["nvidia", "amd"]


def test_the_cards_spec_is_looked_up_once():
    """Peak, counters and waterfall read one spec per card name, asked once however many
    GPUs and snapshots (it was asked by each part, per GPU and per snapshot)."""
    from trainmeter.hardware.specs import lookup

    asked: list[str] = []

    def counting(name: str):
        asked.append(name)
        return lookup(name)

    row = dict(gpu_util=0.9, sm_clock_mhz=1600, max_sm_clock_mhz=1980)  # no GPM: clocks
    engine = Engine(lookup=counting)
    for r in flat(
        start(0.0, **SHAPE, convention="hf"), hello(0.1, world_size=2), device(0.2),
        device(0.2, index=1, rank=1), steps(1.0, 1.0, 6, 10_000),
        gpu(5.0, gpu_row(0, **row), gpu_row(1, **row)),
    ):
        engine.feed(r)
    for _ in range(3):
        snap = engine.snapshot()
    assert asked == [H100]
    clocks = {f["name"]: f for f in snap["waterfall"]["factors"]}["clocks"]
    # 1600 MHz under the H100's 1830 MHz tensor clock, both GPUs alike: 1600 / 1830
    assert clocks["value"] == pytest.approx(1600 / 1830)
    assert snap["peak"]["bf16_dense_flops"] == 989.5e12
