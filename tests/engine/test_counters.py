"""The ladder, OFU, the OFU-MFU gap, observed FLOPs, arithmetic intensity and energy."""

from __future__ import annotations

import pytest

from trainmeter.engine import Engine

from .build import H100, device, flat, gpu, gpu_row, rec, run, start, steps
from .test_budget import SHAPE

A100 = "NVIDIA A100-SXM4-80GB"


def h100_row(index=0, **extra):
    # tensor active 0.5 at SM clock 1464 MHz: OFU = 0.5 x 1464 / 1830 (tensor clock) = 0.4
    fields = dict(
        gpu_util=1.0,
        sm_active=0.8,
        tensor_active=0.5,
        dram_active=0.5,
        sm_clock_mhz=1464,
        max_sm_clock_mhz=1980,
        window_s=1.0,
    )
    fields.update(extra)
    return gpu_row(index, H100, **fields)


def one_h100(*extra):
    # hf 5,831,346,816 FLOP/token at 10,000 tok/s on 1 H100 SXM:
    # MFU = 5.831346816e13 / 989.5e12 = 0.058932
    return [start(0.0, **SHAPE, convention="hf"), device(0.2), steps(1.0, 1.0, 6, 10_000), *extra]


def test_ofu_ladder_and_gap():
    snap = run(one_h100(gpu(2.0, h100_row()), gpu(3.0, h100_row())))
    assert snap["ofu"]["value"] == pytest.approx(0.4)
    assert snap["ofu"]["comparable_with_mfu"] is True
    mfu = 5_831_346_816 * 10_000 / 989.5e12
    assert snap["mfu"]["value"] == pytest.approx(mfu)
    assert snap["mfu_ofu_gap"]["value"] == pytest.approx(0.4 - mfu)
    assert snap["mfu_ofu_gap"]["mfu"] == "hf"
    rungs = snap["ladder"]["gpus"]["0"]
    assert rungs == {
        "gpu_util": 1.0,
        "sm_active": 0.8,
        "tensor_active": 0.5,
        "ofu": pytest.approx(0.4),
        "mfu": pytest.approx(mfu),
    }
    assert snap["gpus"]["0"]["name"] == H100


def test_observed_flops_sum_ofu_peak_window():
    # two samples of 1 s at OFU 0.4 on one H100: 2 x 0.4 x 989.5e12 x 1 = 7.916e14 FLOPs
    snap = run(one_h100(gpu(2.0, h100_row()), gpu(3.0, h100_row())))
    assert snap["flops_observed"]["value"] == pytest.approx(7.916e14)


def test_intensity_is_ridge_times_mfu_over_dram():
    # ridge 989.5e12 / 3350e9 = 295.373; MFU 0.058932; DRAM active 0.5
    # -> 295.373 x 0.058932 / 0.5 = 34.81 FLOP/byte
    snap = run(one_h100(gpu(2.0, h100_row())))
    ridge = 989.5e12 / 3350e9
    mfu = 5_831_346_816 * 10_000 / 989.5e12
    assert snap["arithmetic_intensity"]["value"] == pytest.approx(ridge * mfu / 0.5)
    assert snap["arithmetic_intensity"]["value"] == pytest.approx(34.81, rel=1e-3)


def test_ladder_mean_over_gpus():
    rows = (
        h100_row(0, gpu_util=1.0, tensor_active=0.5),
        h100_row(1, gpu_util=0.6, tensor_active=0.3),
    )
    snap = run(gpu(1.0, *rows))
    mean = snap["ladder"]["mean"]
    assert mean["gpu_util"] == pytest.approx(0.8)
    assert mean["tensor_active"] == pytest.approx(0.4)
    # OFU: (0.5 + 0.3) / 2 x 1464 / 1830 = 0.32
    assert mean["ofu"] == pytest.approx(0.32)
    assert snap["ofu"]["value"] == pytest.approx(0.32)


def test_no_tensor_clock_scales_to_max_sm_clock_and_drops_the_gap():
    # A100 80GB: no published tensor clock. 0.6 x 705 / 1410 = 0.3, not comparable.
    row = gpu_row(0, A100, tensor_active=0.6, sm_clock_mhz=705, max_sm_clock_mhz=1410, window_s=2.0)
    snap = run(
        start(0.0, **SHAPE, convention="hf"),
        device(0.2, A100),
        steps(1.0, 1.0, 6, 1000),
        gpu(2.0, row),
    )
    assert snap["ofu"]["value"] == pytest.approx(0.3)
    assert snap["ofu"]["comparable_with_mfu"] is False
    assert "mfu_ofu_gap" not in snap and "tensor clock" in snap["absent"]["mfu_ofu_gap"]
    # still observed: 0.3 x 312e12 x 2 s
    assert snap["flops_observed"]["value"] == pytest.approx(0.3 * 312e12 * 2)


def test_unavailable_and_gpm_off_are_absent_with_their_reason():
    snap = run(rec("sample.gpu", 1.0, rank=None, src="tm", unavailable="NVML not found"))
    assert "NVML not found" in snap["absent"]["ladder"]
    assert "NVML not found" in snap["absent"]["ofu"]
    d = {"gpus": [gpu_row(0, gpu_util=0.9)], "gpm_unavailable": "GPM needs Hopper or newer"}
    snap = run(rec("sample.gpu", 1.0, rank=None, src="tm", **d))
    assert snap["ladder"]["gpus"]["0"] == {"gpu_util": 0.9}
    assert snap["absent"]["ofu"] == "GPM needs Hopper or newer"


def test_energy_sums_per_gpu_and_survives_a_counter_reset():
    # GPU 0: 1,000 -> 1,500 J = 500 J.  GPU 1: 2,000 -> 2,600 = 600, then the counter restarts
    # (100, a new baseline) and reaches 300: +200.  Total 1,300 J over 60,000 tokens.
    samples = [
        gpu(2.0, gpu_row(0, energy_j=1000.0), gpu_row(1, energy_j=2000.0)),
        gpu(3.0, gpu_row(0, energy_j=1500.0), gpu_row(1, energy_j=2600.0)),
        gpu(4.0, gpu_row(1, energy_j=100.0)),
        gpu(5.0, gpu_row(1, energy_j=300.0)),
    ]
    snap = run(start(0.0), steps(1.0, 1.0, 6, 10_000), samples)
    energy = snap["energy"]
    assert energy["per_gpu"] == {"0": 500.0, "1": 800.0}
    assert energy["joules"] == 1300.0
    assert energy["resets"] == 1
    assert energy["joules_per_token"] == pytest.approx(1300 / 60_000)
    assert "energy" in run(start(0.0))["absent"]


def test_gpus_are_listed_in_index_order_past_ten():
    rows = [h100_row(i) for i in (10, 2, 0, 1)]
    snap = run(gpu(1.0, *rows))
    assert list(snap["ladder"]["gpus"]) == ["0", "1", "2", "10"]
    assert list(snap["gpus"]) == ["0", "1", "2", "10"]


def test_the_latest_row_read_late_is_the_row_read_at_once():
    """A GPU's ladder and row are made from its latest row when a snapshot reads them: read
    after every row or only at the end, the snapshot is the same (rows that drop a field, carry
    a non-finite or a string value, and lose the tensor activity that gives OFU)."""
    rows = [
        gpu(2.0, h100_row(), h100_row(1, sm_active=0.7)),
        gpu(3.0, h100_row(gpu_util=float("nan"), power_w=350.0), h100_row(1)),
        gpu(4.0, h100_row(tensor_active=None, sm_clock_mhz="1464", temperature_c=61)),
        gpu(5.0, h100_row(1, dram_active=0.2)),
    ]
    eager, late = Engine(), Engine()
    for record in flat(one_h100()):
        eager.feed(record)
        late.feed(record)
    seen = []
    for record in rows:
        eager.feed(record)
        late.feed(record)
        seen.append(eager.snapshot(now=6.0))
    snap = late.snapshot(now=6.0)
    assert snap == seen[-1]
    assert snap["ladder"]["gpus"]["0"] == {"gpu_util": 1.0, "sm_active": 0.8, "mfu": snap["mfu"]["value"]}
    assert snap["gpus"]["0"]["temperature_c"] == 61 and "sm_clock_mhz" not in snap["gpus"]["0"]
    assert snap["ladder"]["gpus"]["1"]["ofu"] == pytest.approx(0.4)
    assert seen[1]["gpus"]["0"]["power_w"] == 350.0 and "gpu_util" not in seen[1]["gpus"]["0"]
