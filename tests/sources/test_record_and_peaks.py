"""The recorder writes the fixture format the fake replays; measured peak files are picked up."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timezone

import pytest

from trainmeter.hardware.measure_peak import build_record, matmul_flops
from trainmeter.hardware.measured_peaks import peak_path, read_peak, write_peak
from trainmeter.sources.gpu.fake import FakeBackend
from trainmeter.sources.gpu.record import RecordingBackend, record
from trainmeter.sources.gpu.sampler import GpuSampler

from .nvml_testkit import Clock, fixture_path

H100_UUID = "GPU-5f3b0c8e-91d2-4c6a-b0a7-1e2d3c4b5a60"


def _rows(backend, n=3):
    clock = Clock()
    s = GpuSampler(
        backend=backend,
        gpus="0,1",
        clock=clock,
        process_names=lambda: [],
        env={"TRAINMETER_PEAKS_DIR": "/nonexistent"},
    )
    out = []
    for _ in range(n):
        out.append(s.sample())
        clock.t += 1.0
    s.close()
    return out


def test_recording_then_replaying_gives_the_same_rows():
    rec = RecordingBackend(FakeBackend(fixture_path("h100_sxm_gpm")))
    original = _rows(rec)
    replayed = _rows(FakeBackend(json.loads(json.dumps(rec.fixture))))
    assert replayed == original
    assert original[1]["gpus"][0]["tensor_active"] == pytest.approx(0.612)


def test_record_helper_drives_every_op_and_keeps_errors():
    fixture = record(FakeBackend(fixture_path("power_fails_halfway")), samples=3, interval_s=0)
    ops = fixture["devices"][0]["ops"]
    assert ops["power_mw"] == [351000, {"error": "Unknown"}, 355000]
    assert ops["gpm"] == [{"error": "NotSupported"}] * 3
    assert fixture["init"] is None and fixture["versions"]["driver"] == "535.161.08"


def test_record_without_nvml_keeps_the_init_error():
    fixture = record(FakeBackend(fixture_path("nvml_missing")), samples=1, interval_s=0)
    assert fixture["init"] == {"error": "LibraryNotFound"} and fixture["devices"] == []


def test_build_record_takes_the_best_size():
    # n=4096: 2*4096^3 = 137.4 GFLOP a matmul; 1000 of them in 0.25 s = 549.8 TFLOP/s
    # n=8192: 2*8192^3 = 1.0995 TFLOP; 400 in 0.6 s = 733.0 TFLOP/s  <- best
    assert matmul_flops(4096) == 2 * 4096**3 == 137_438_953_472
    rec = build_record(
        uuid=H100_UUID,
        device_name="NVIDIA H100 80GB HBM3",
        timings={4096: (1000, 0.25), 8192: (400, 0.6)},
        torch_version="2.13.0",
        hostname="h",
        when=datetime(2026, 1, 2, tzinfo=timezone.utc),
    )
    assert rec["best_size"] == 8192
    assert rec["tflops"] == pytest.approx(2 * 8192**3 * 400 / 0.6 / 1e12)
    assert rec["tflops"] == pytest.approx(733.0, abs=0.1)
    assert rec["per_size_tflops"]["4096"] == pytest.approx(549.76, abs=0.01)
    assert rec["date"] == "2026-01-02T00:00:00Z" and rec["sizes"] == [4096, 8192]


def test_peak_file_is_picked_up_by_the_sampler(tmp_path, make_sampler):
    env = {"TRAINMETER_PEAKS_DIR": str(tmp_path / "peaks")}
    rec = build_record(
        uuid=H100_UUID,
        device_name="NVIDIA H100 80GB HBM3",
        timings={8192: (400, 0.6)},
        torch_version="2.13.0",
        hostname="testhost",
    )
    path = write_peak(rec, env)
    assert path == peak_path(H100_UUID, "testhost", env)
    assert path.name == f"testhost-{H100_UUID}.json"
    sampler, _, _ = make_sampler("h100_sxm_gpm", gpus="0,1", env=env)
    gpu0, gpu1 = sampler.sample()["gpus"]
    assert gpu0["measured_peak_flops"] == pytest.approx(733.0e12, rel=1e-3)
    assert gpu0["measured_peak_source"].startswith("measured: dense bf16 matmul n=8192")
    assert "measured_peak_flops" not in gpu1  # another GPU, no file


def test_peak_file_for_another_host_or_bad_content_is_ignored(tmp_path):
    env = {"TRAINMETER_PEAKS_DIR": str(tmp_path)}
    rec = build_record(
        uuid=H100_UUID,
        device_name="x",
        timings={8192: (1, 1.0)},
        torch_version="t",
        hostname="elsewhere",
    )
    write_peak(rec, env)
    assert read_peak(H100_UUID, "testhost", env) is None
    assert read_peak(H100_UUID, "elsewhere", env) is not None
    peak_path(H100_UUID, "bad", env).write_text('{"format": "trainmeter-peak/1", "tflops": -1}')
    assert read_peak(H100_UUID, "bad", env) is None


def test_measure_peak_without_a_gpu_says_so_and_exits_1():
    res = subprocess.run(
        [sys.executable, "-m", "trainmeter.hardware.measure_peak"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 1
    assert "no CUDA GPU" in res.stderr
