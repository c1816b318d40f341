"""The real NVML backend: its failure on this driverless machine, and its conversions and GPM
request over the real pynvml module with the C calls replaced (no GPU needed)."""

from __future__ import annotations

from types import SimpleNamespace

import pynvml
import pytest

from trainmeter.sources.gpu.nvml import NvmlError, PynvmlBackend


def test_init_here_fails_with_a_named_reason_or_works_on_a_gpu_machine():
    backend = PynvmlBackend()
    try:
        backend.init()
    except NvmlError as exc:
        assert exc.name in {"LibraryNotFound", "DriverNotLoaded", "NoPermission"}
        assert "NVML" in exc.reason or "driver" in exc.reason
        with pytest.raises(NvmlError, match="Uninitialized"):
            backend.device_count()
        return
    try:  # a machine with a driver: the basic questions answer
        assert backend.device_count() >= 0
    finally:
        backend.shutdown()


@pytest.fixture
def stubbed(monkeypatch):
    """pynvml with every C call this backend makes replaced by Python stand-ins."""
    state = {"freed": 0, "requests": []}

    def raise_(code):
        def fn(*a):
            raise pynvml.NVMLError(code)

        return fn

    def metrics_get(req):
        state["requests"].append(
            (req.version, req.numMetrics, bool(req.sample1), bool(req.sample2))
        )
        values = {
            pynvml.NVML_GPM_METRIC_SM_UTIL: 90.0,
            pynvml.NVML_GPM_METRIC_SM_OCCUPANCY: 30.0,
            pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL: 55.5,
            pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL: 12.0,
        }
        for slot in range(req.numMetrics):
            req.metrics[slot].value = values[req.metrics[slot].metricId]
            req.metrics[slot].nvmlReturn = pynvml.NVML_SUCCESS
        return req

    def sample_free(sample):
        state["freed"] += 1

    def field_values(handle, ids):
        assert ids == [
            pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX,
            pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX,
        ]
        return [SimpleNamespace(nvmlReturn=0, value=SimpleNamespace(ullVal=v)) for v in (7, 9)]

    stubs = {
        "nvmlInit": lambda: None,
        "nvmlShutdown": lambda: None,
        "nvmlSystemGetDriverVersion": lambda: "550.54.15",
        "nvmlSystemGetNVMLVersion": raise_(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND),
        "nvmlSystemGetCudaDriverVersion": lambda: 12040,
        "nvmlDeviceGetCount": lambda: 1,
        "nvmlDeviceGetHandleByIndex": lambda i: f"h{i}",
        "nvmlDeviceGetName": lambda h: b"NVIDIA H100 80GB HBM3",
        "nvmlDeviceGetUtilizationRates": lambda h: SimpleNamespace(gpu=50, memory=20),
        "nvmlDeviceGetPowerUsage": raise_(pynvml.NVML_ERROR_NOT_SUPPORTED),
        "nvmlDeviceGetTemperature": raise_(pynvml.NVML_ERROR_GPU_IS_LOST),
        "nvmlDeviceGetClockInfo": lambda h, kind: {pynvml.NVML_CLOCK_SM: 1755}[kind],
        "nvmlDeviceGetComputeRunningProcesses": lambda h: [
            SimpleNamespace(pid=11, usedGpuMemory=1024),
            SimpleNamespace(pid=12, usedGpuMemory=None),
        ],
        "nvmlDeviceGetFieldValues": field_values,
        "nvmlGpmQueryDeviceSupport": lambda h: SimpleNamespace(isSupportedDevice=1),
        "nvmlGpmSampleAlloc": lambda: pynvml.c_nvmlGpmSample_t(pynvml.struct_c_nvmlGpmSample_t()),
        "nvmlGpmSampleGet": lambda h, s: s,
        "nvmlGpmSampleFree": sample_free,
        "nvmlGpmMetricsGet": metrics_get,
    }
    for name, fn in stubs.items():
        monkeypatch.setattr(pynvml, name, fn)
    backend = PynvmlBackend()
    backend.init()
    yield backend, state
    backend.shutdown()


def test_conversions_and_error_mapping(stubbed):
    backend, _ = stubbed
    assert backend.versions() == {"driver": "550.54.15", "cuda": 12040}  # NVML version: absent
    assert backend.device_count() == 1
    assert backend.query(0, "name") == "NVIDIA H100 80GB HBM3"
    assert backend.query(0, "utilization") == {"gpu": 50, "memory": 20}
    assert backend.query(0, "sm_clock_mhz") == 1755
    assert backend.query(0, "processes") == [
        {"pid": 11, "used_memory_b": 1024},
        {"pid": 12, "used_memory_b": None},
    ]
    assert backend.query(0, "nvlink_kib") == {"tx": 7, "rx": 9}
    with pytest.raises(NvmlError) as err:
        backend.query(0, "power_mw")
    assert err.value.name == "NotSupported"
    with pytest.raises(NvmlError) as err:
        backend.query(0, "temperature_c")
    assert err.value.name == "GpuIsLost"
    with pytest.raises(NvmlError) as err:  # a binding without the function
        backend.query(0, "energy_mj")
    assert err.value.name in {"FunctionNotFound", "Uninitialized", "Unknown"}


def test_gpm_builds_the_request_between_two_samples(stubbed):
    backend, state = stubbed
    assert backend.query(0, "gpm_supported") is True
    assert backend.query(0, "gpm") is None  # first sample: no window yet
    assert backend.query(0, "gpm") == {
        "sm_util": 90.0,
        "sm_occupancy": 30.0,
        "any_tensor_util": 55.5,
        "dram_bw_util": 12.0,
    }
    assert state["requests"] == [(pynvml.NVML_GPM_METRICS_GET_VERSION, 4, True, True)]
    assert state["freed"] == 1  # the older sample is freed, the newer kept for the next window
