"""Lines that once formatted their numbers by hand now read by the one rule (docs/reading.md):
the GPU block of `tm summary`, the models trained together, `tm hardware`'s peak line."""

from __future__ import annotations

import io

from rich.console import Console

from trainmeter.views.insight_text import models_lines
from trainmeter.views.summary_gpus import gpus


def _plain(parts: list) -> str:
    out = io.StringIO()
    console = Console(file=out, width=200, color_system=None)
    for part in parts:
        console.print(part)
    return out.getvalue()


def test_the_gpu_block_reads_its_numbers_by_the_rule() -> None:
    snap = {
        "ofu": {"value": 0.4123, "convention": "tensor-active", "source": "measured"},
        "mfu_ofu_gap": {"value": 0.0456},
        "arithmetic_intensity": {"value": 12.345, "unit": "FLOP/byte"},
        "peak": {"ridge": 295.2},
        "gpus": {"0": {"name": "H100", "power_w": 612.4, "power_limit_w": 700.0,
                       "memory_used_b": 61.2 * 2**30, "memory_total_b": 80 * 2**30,
                       "sm_clock_mhz": 1980, "temperature_c": 65.5}},
    }
    text = _plain(gpus(snap))
    assert "OFU - MFU gap 4.6 points" in text  # 4.56 points: one decimal, as a share reads
    # before: '12.3' (:.3g) and 'ridge 295' (:.0f); now si(): 12.3, 295
    assert "arithmetic intensity 12.3 FLOP/byte, ridge 295: memory-bound" in text
    # before: '612/700 W', 'mem 61.2/80 GiB', '1980 MHz', '66°C'
    assert "612/700 W, mem 61.2/80.0 GiB, 1980 MHz, 65.5 °C" in text


def test_models_trained_together_count_their_parameters_as_counts_read() -> None:
    snap = {"models": {"trained": [{"name": "G", "class": "Gen", "params": 124_439_808},
                                   {"name": "D", "class": "Disc", "params": 950}],
                       "total_params": 124_440_758, "source": "counted"}}
    lines = models_lines(snap)
    assert lines[0] == "G (Gen): 124M parameters"  # before: 124,439,808
    assert lines[1] == "D (Disc): 950 parameters"
    assert lines[2].startswith("total 124M parameters (counted); FLOPs from the counted step")


def test_tm_hardware_writes_the_peak_and_sizes_by_the_rule() -> None:
    from trainmeter.cli.hardware import _bytes

    assert _bytes(85.5e9) == "79.6 GiB" and _bytes(None) == "?"
    assert _bytes(512 * 2**20) == "512 MiB"  # before: '0.5 GiB'
