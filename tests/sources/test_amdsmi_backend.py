"""AMD GPUs through AMD SMI: the backend's answers in NVML's units from a replayed fixture, what
AMD cannot count absent with its reason, and OFU absent (not guessed) in the engine."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from tests.engine.build import device, hello, rec, run, start, steps
from trainmeter.sources.gpu import GpuSampler, NvmlError
from trainmeter.sources.gpu.amd import AmdsmiBackend
from trainmeter.sources.gpu.amd_fake import ENV_FAKE_AMDSMI, FakeAmdsmi
from trainmeter.sources.gpu.fake import FakeBackend
from trainmeter.sources.gpu.families import FirstBackend, backend_from_env

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PAIR = FIXTURES / "amdsmi" / "mi300x_pair.json"


def sampler(backend, pids=(4242,)):
    ticks = itertools.count(0.0, 1.0)
    return GpuSampler(backend, env={}, tree_pids=lambda: list(pids), clock=lambda: next(ticks))


def test_mi300x_rows_in_nvml_units():
    s = sampler(AmdsmiBackend(FakeAmdsmi(PAIR)))
    s.sample()  # idle
    out = s.sample()
    assert out["versions"] == {"amdsmi": "6.4.0", "driver": "6.8.5"}
    assert out["selected_by"] == "process" and out["selected"] == [0]  # pid 4242 is on GPU 0
    (row,) = out["gpus"]
    assert row["name"] == "AMD Instinct MI300X"
    assert (row["gpu_util"], row["mem_util"]) == (0.97, 0.41)  # gfx / umc activity
    assert row["memory_used_b"] == 143_051 * 2**20 and row["memory_total_b"] == 196_592 * 2**20
    assert (row["power_w"], row["power_limit_w"]) == (712.0, 750.0)  # W; cap 750,000,000 µW
    # energy: accumulator x resolution µJ: 1,065,536 x 15.259 = 16,259,013.824 µJ = 16.259013824 J
    assert row["energy_j"] == pytest.approx(16.259013824, rel=1e-12)
    assert (row["sm_clock_mhz"], row["max_sm_clock_mhz"], row["mem_clock_mhz"]) == (
        2100,
        2100,
        1300,
    )
    assert row["temperature_c"] == 78
    assert row["processes"] == [{"pid": 4242, "used_memory_b": 150_000_000_000}]


def test_what_amd_cannot_count_is_absent_with_its_reason():
    s = sampler(AmdsmiBackend(FakeAmdsmi(PAIR)))
    row = s.sample()["gpus"][0]
    missing = row["missing"]
    assert "tensor_active" not in row
    assert "no matrix-core activity counter" in missing["tensor_active"]
    assert "OFU" in missing["tensor_active"]
    for field in ("throttle", "pcie_tx_b_s", "nvlink_tx_b_s"):
        assert missing[field].startswith("not supported by AMD SMI")


def test_ofu_is_absent_on_amd_and_mfu_uses_the_mi300x_line():
    # the sampler's whole answers, as the supervisor records them (device uuid as the agent's)
    s = sampler(AmdsmiBackend(FakeAmdsmi(PAIR)))
    samples = []
    for i in range(3):
        out = s.sample()
        out["gpus"] = [{**out["gpus"][0], "uuid": "GPU-0"}]
        samples.append(rec("sample.gpu", 2.0 + i, rank=None, src="tm", **out))
    snap = run(
        start(0.0, convention="hf", n_params=1_039_000_000, n_embedding_params=32768 * 2048,
              n_layers=18, d_model=2048, seq_len=1024),
        hello(0.1), device(0.2, name="AMD Instinct MI300X"),
        steps(1.0, 1.0, 6, tokens=100_000),
        samples,
    )
    assert snap["peak"]["bf16_dense_flops"] == pytest.approx(1307.4e12)
    # MFU = 5,831,346,816 x 1e5 / 1307.4e12 = 0.446026
    assert snap["mfu"]["value"] == pytest.approx(0.446026, rel=1e-5)
    assert "ofu" not in snap
    assert "matrix-core" in snap["absent"]["ofu"]


def test_env_picks_the_amd_fake_and_nvml_then_amd_otherwise(monkeypatch):
    backend = backend_from_env({ENV_FAKE_AMDSMI: str(PAIR)})
    backend.init()
    assert backend.device_count() == 2 and backend.query(1, "name") == "AMD Instinct MI300X"
    # no NVIDIA driver: AMD SMI answers
    first = FirstBackend(FakeBackend(FIXTURES / "nvml" / "nvml_missing.json"),
                         AmdsmiBackend(FakeAmdsmi(PAIR)))
    first.init()
    assert first.query(0, "uuid").startswith("1fff74a1")
    # neither: NVML's reason first, AMD SMI's beside it
    neither = FirstBackend(FakeBackend(FIXTURES / "nvml" / "nvml_missing.json"),
                           AmdsmiBackend(FakeAmdsmi(FIXTURES / "amdsmi" / "no_driver.json")))
    with pytest.raises(NvmlError) as err:
        neither.init()
    assert err.value.name == "LibraryNotFound"
    assert err.value.reason.startswith("NVML library not found")
    assert "AMD SMI could not start" in err.value.reason
    out = sampler(neither).sample()
    assert out["unavailable"].startswith("NVML library not found")


def test_amd_smi_that_lists_no_devices_is_named_as_amd_smi():
    """The sampler said 'NVML lists no devices' whichever library it had opened."""
    from trainmeter.sources.gpu.amd import AmdSmiError

    class Listless(AmdsmiBackend):
        def device_count(self) -> int:
            raise AmdSmiError("AmdNoDriver")

    out = sampler(Listless(FakeAmdsmi(PAIR))).sample()
    assert out["unavailable"].startswith("AMD SMI lists no devices: ")
    assert "NVML" not in out["unavailable"]
