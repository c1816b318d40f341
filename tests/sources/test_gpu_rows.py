"""GPU rows over the fake NVML backend: each card and failure in tests/fixtures/nvml."""

from __future__ import annotations

import json

import pytest

from trainmeter import records
from trainmeter.sources.gpu.fake import FakeBackend
from trainmeter.sources.gpu.sampler import GPM_FIELDS, NO_GPM_CARD, GpuSampler, decode_throttle

from .nvml_testkit import Clock, fixture_path


def test_h100_rows_convert_units_and_gpm_window(make_sampler):
    sampler, backend, clock = make_sampler("h100_sxm_gpm", gpus="0")
    first = sampler.sample()
    assert first["selected_by"] == "flag" and first["selected"] == [0]
    assert first["versions"] == {"driver": "550.54.15", "nvml": "12.550.54.15", "cuda": "12.4"}
    row = first["gpus"][0]
    assert row["name"] == "NVIDIA H100 80GB HBM3"
    assert row["throttle"] == ["idle"]  # mask 0x1
    # GPM and NVLink rates need two samples: absent with the reason, never zero.
    for field in GPM_FIELDS + ("nvlink_tx_b_s",):
        assert field not in row and field in row["missing"]
    assert "gpm_unavailable" not in first

    clock.t += 2.0
    row = sampler.sample()["gpus"][0]
    assert row["gpu_util"] == pytest.approx(0.97)
    assert row["mem_util"] == pytest.approx(0.45)
    assert row["power_w"] == pytest.approx(612.345)  # 612345 mW
    assert row["power_limit_w"] == pytest.approx(700.0)
    # (981234567 + 612000) mJ = 981846.567 J
    assert row["energy_j"] == pytest.approx(981846.567)
    assert row["pcie_tx_b_s"] == 48828 * 1024  # 49,999,872 B/s
    # NVLink TX counter grew 48,828,125 KiB in 2 s: 48828125 * 1024 / 2 = 25.0e9 B/s
    assert row["nvlink_tx_b_s"] == pytest.approx(25.0e9)
    assert row["nvlink_rx_b_s"] == pytest.approx(24414062 * 1024 / 2)
    assert row["sm_clock_mhz"] == 1980 and row["max_sm_clock_mhz"] == 1980
    assert row["temperature_c"] == 58
    assert row["throttle"] == []
    assert row["processes"] == [{"pid": 4242, "used_memory_b": 63350767616}]
    # GPM percents -> fractions, over the 2 s between the two sample() calls
    assert row["window_s"] == pytest.approx(2.0)
    assert row["sm_active"] == pytest.approx(0.925)
    assert row["tensor_active"] == pytest.approx(0.612)
    assert row["dram_active"] == pytest.approx(0.384)
    assert row["sm_occupancy"] == pytest.approx(0.41)
    assert "missing" not in row

    clock.t += 0.5
    row = sampler.sample()["gpus"][0]
    assert row["window_s"] == pytest.approx(0.5)
    assert row["tensor_active"] == pytest.approx(0.70)
    assert row["throttle"] == ["sw_power_cap"]  # mask 0x4


def test_payload_is_a_valid_record(make_sampler):
    sampler, _, clock = make_sampler("h100_sxm_gpm")
    sampler.sample()
    clock.t += 1
    d = sampler.sample()
    line = records.encode(records.make("sample.gpu", d, t=1.0, src="tm"))
    assert records.decode(line)["d"] == d


def test_a100_has_no_gpm_and_says_why(make_sampler):
    sampler, backend, clock = make_sampler("a100_no_gpm")
    sampler.sample()
    clock.t += 1.0
    d = sampler.sample()
    assert d["gpm_unavailable"] == NO_GPM_CARD
    row = d["gpus"][0]
    for field in ("sm_active", "tensor_active", "dram_active", "sm_occupancy", "window_s"):
        assert field not in row
        assert row["missing"][field] == NO_GPM_CARD
    assert row["power_w"] == pytest.approx(362.5)
    # GPM was never armed: the sampler asked whether it exists, never for a GPM sample
    assert backend.calls[(0, "gpm")] == 0
    assert backend.calls[(0, "gpm_supported")] == 1


def test_unknown_card_lists_every_missing_field(make_sampler):
    sampler, _, _ = make_sampler("geforce_gt1030_unknown")
    row = sampler.sample()["gpus"][0]
    assert row["name"] == "NVIDIA GeForce GT 1030"
    assert row["gpu_util"] == pytest.approx(0.35)
    for field in ("power_w", "power_limit_w", "energy_j", "pcie_tx_b_s", "nvlink_tx_b_s"):
        assert field not in row
        assert "NotSupported" in row["missing"][field]
    assert row["missing"]["tensor_active"] == NO_GPM_CARD


def test_nvml_missing_is_unavailable_with_reason(make_sampler):
    sampler, _, _ = make_sampler("nvml_missing")
    d = sampler.sample()
    assert d == {"unavailable": "NVML library not found (no NVIDIA driver on this machine)"}
    assert sampler.sample() == d  # does not retry init each second


def test_power_fails_on_second_sample_then_recovers(make_sampler):
    sampler, _, clock = make_sampler("power_fails_halfway")
    rows = []
    for _ in range(3):
        rows.append(sampler.sample()["gpus"][0])
        clock.t += 1.0
    assert rows[0]["power_w"] == pytest.approx(351.0)
    assert "power_w" not in rows[1]
    assert rows[1]["missing"]["power_w"] == "NVML returned an unknown error"
    assert rows[1]["gpu_util"] == pytest.approx(1.0)  # the rest of the row still came
    assert rows[2]["power_w"] == pytest.approx(355.0)
    assert "power_w" not in rows[2].get("missing", {})


def test_lost_gpu_is_marked_and_not_asked_again(make_sampler):
    sampler, backend, clock = make_sampler("gpu_lost", gpus="0,1")
    first = sampler.sample()
    assert "lost" not in first["gpus"][0]
    clock.t += 1.0
    second = sampler.sample()
    lost, other = second["gpus"]
    assert lost["lost"] is True and lost["uuid"].startswith("GPU-5f3b")
    assert "gpu_util" not in lost
    assert lost["missing"]["gpu_util"].startswith("the GPU is lost")
    assert lost["missing"]["tensor_active"].startswith("the GPU is lost")
    assert other["gpu_util"] == 0.0 and "lost" not in other  # GPU 1 carries on
    asked = backend.calls[(0, "utilization")]
    clock.t += 1.0
    third = sampler.sample()
    assert third["gpus"][0]["lost"] is True
    assert backend.calls[(0, "utilization")] == asked  # a lost GPU is not polled


def test_dcgm_on_the_node_keeps_gpm_off(make_sampler):
    sampler, backend, clock = make_sampler(
        "h100_sxm_gpm", gpus="0", process_names=lambda: ["python", "nv-hostengine"]
    )
    sampler.sample()
    clock.t += 1.0
    d = sampler.sample()
    assert "nv-hostengine" in d["gpm_unavailable"]
    assert "sm_active" not in d["gpus"][0]
    assert "DCGM" in d["gpus"][0]["missing"]["tensor_active"]
    assert backend.calls[(0, "gpm")] == 0 and backend.calls[(0, "gpm_supported")] == 0


def test_close_shuts_nvml_down_once(make_sampler):
    sampler, backend, _ = make_sampler("a100_no_gpm")
    sampler.sample()
    sampler.close()
    sampler.close()
    assert backend.shutdowns == 1


def test_decode_throttle_names_and_unknown_bits():
    assert decode_throttle(0) == []
    # 0x4 sw_power_cap | 0x40 hw_thermal_slowdown | 0x80 hw_power_brake = 0xC4
    assert decode_throttle(0xC4) == ["sw_power_cap", "hw_thermal_slowdown", "hw_power_brake"]
    assert decode_throttle(0x1 | 0x2000) == ["idle", "bit_0x2000"]


def test_sampler_never_raises_on_a_broken_backend():
    class Broken:
        def init(self):
            pass

        def versions(self):
            return {}

        def device_count(self):
            raise RuntimeError("boom")

        def shutdown(self):
            pass

    d = GpuSampler(backend=Broken(), process_names=lambda: []).sample()
    assert "boom" in d["unavailable"]


def test_gpm_taken_by_another_client_disarms_and_says_so(make_sampler, tmp_path):
    fixture = json.loads(fixture_path("h100_sxm_gpm").read_text())
    fixture["devices"][0]["ops"]["gpm"] = [None, {"error": "InUse"}]
    path = tmp_path / "inuse.json"
    path.write_text(json.dumps(fixture))
    clock = Clock()
    backend = FakeBackend(path)
    sampler = GpuSampler(backend=backend, gpus="0", clock=clock, process_names=lambda: [])
    sampler.sample()
    clock.t += 1
    d = sampler.sample()
    assert "in use by another client" in d["gpus"][0]["missing"]["tensor_active"]
    assert d["gpm_unavailable"].startswith("GPM disarmed")
    clock.t += 1
    sampler.sample()
    assert backend.calls[(0, "gpm")] == 2  # not asked again once disarmed
