"""NVIDIA GPUs through NVML (`pynvml`, nvidia-ml-py): the NVIDIA door behind the `Backend` seam.

It never creates a CUDA context (NVML does not) and never shells out to `nvidia-smi`. Any
exception from a call, NVML or not, becomes an `NvmlError`, so a broken driver or an old binding
can only ever cost a field, never the run.
"""

from __future__ import annotations

import threading
from typing import Any

from .backend import GpuError


class NvmlError(GpuError):
    """An NVML call failed (or NVML's fake replayed a failure). `name`: NVML's error name
    without the prefix (`NotSupported`)."""

    library = "NVML"


def _error_name(exc: BaseException) -> str:
    """`NVMLError_GpuIsLost` -> `GpuIsLost`; anything else -> `Unknown` (with its type kept)."""
    cls = type(exc).__name__
    if cls.startswith("NVMLError_"):
        return cls[len("NVMLError_") :]
    if cls in ("AttributeError", "NotImplementedError"):
        return "FunctionNotFound"
    return "Unknown"


class PynvmlBackend:
    """NVML through nvidia-ml-py. Handles are fetched lazily and kept; GPM samples per device."""

    def __init__(self) -> None:
        self._nv: Any = None
        self._handles: dict[int, Any] = {}
        self._gpm_prev: dict[int, Any] = {}
        self._lock = threading.Lock()

    # -- lifecycle -----------------------------------------------------------------------
    def init(self) -> None:
        try:
            import pynvml
        except ImportError:
            raise NvmlError("NoBinding") from None
        try:
            pynvml.nvmlInit()
        except Exception as exc:  # noqa: BLE001 - every failure is a reason, never a crash
            raise NvmlError(_error_name(exc)) from None
        self._nv = pynvml

    def shutdown(self) -> None:
        nv, self._nv = self._nv, None
        if nv is None:
            return
        for sample in self._gpm_prev.values():
            try:
                nv.nvmlGpmSampleFree(sample)
            except Exception:  # noqa: BLE001 - freeing at shutdown: the driver may be gone
                pass
        self._gpm_prev.clear()
        self._handles.clear()
        try:
            nv.nvmlShutdown()
        except Exception:  # noqa: BLE001 - shutting down: the driver may be gone
            pass

    # -- system --------------------------------------------------------------------------
    def versions(self) -> dict[str, Any]:
        nv = self._need()
        out: dict[str, Any] = {}
        for key, fn in (
            ("driver", "nvmlSystemGetDriverVersion"),
            ("nvml", "nvmlSystemGetNVMLVersion"),
            ("cuda", "nvmlSystemGetCudaDriverVersion"),
        ):
            try:
                value = getattr(nv, fn)()
            except Exception:  # noqa: BLE001 - an older driver lacks this call: the version stays unknown
                continue
            out[key] = value.decode() if isinstance(value, bytes) else value
        return out

    def device_count(self) -> int:
        nv = self._need()
        return int(self._call(nv.nvmlDeviceGetCount))

    # -- devices -------------------------------------------------------------------------
    def query(self, index: int, op: str) -> Any:
        nv = self._need()
        handle = self._handle(index)
        method = getattr(self, f"_op_{op}", None)
        if method is None:
            raise NvmlError("FunctionNotFound", f"unknown op {op}")
        with self._lock:
            return self._call(method, nv, handle, index)

    def _need(self) -> Any:
        if self._nv is None:
            raise NvmlError("Uninitialized")
        return self._nv

    def _handle(self, index: int) -> Any:
        if index not in self._handles:
            self._handles[index] = self._call(self._nv.nvmlDeviceGetHandleByIndex, index)
        return self._handles[index]

    @staticmethod
    def _call(fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except NvmlError:
            raise
        except Exception as exc:  # noqa: BLE001 - mapped to a reason, see module docstring
            raise NvmlError(_error_name(exc)) from None

    @staticmethod
    def _text(value: Any) -> str:
        return value.decode() if isinstance(value, bytes) else str(value)

    def _op_name(self, nv: Any, h: Any, i: int) -> str:
        return self._text(nv.nvmlDeviceGetName(h))

    def _op_uuid(self, nv: Any, h: Any, i: int) -> str:
        return self._text(nv.nvmlDeviceGetUUID(h))

    def _op_memory(self, nv: Any, h: Any, i: int) -> dict[str, int]:
        info = nv.nvmlDeviceGetMemoryInfo(h)
        return {"used": int(info.used), "total": int(info.total)}

    def _op_utilization(self, nv: Any, h: Any, i: int) -> dict[str, int]:
        u = nv.nvmlDeviceGetUtilizationRates(h)
        return {"gpu": int(u.gpu), "memory": int(u.memory)}

    def _op_power_mw(self, nv: Any, h: Any, i: int) -> int:
        return int(nv.nvmlDeviceGetPowerUsage(h))

    def _op_power_limit_mw(self, nv: Any, h: Any, i: int) -> int:
        return int(nv.nvmlDeviceGetEnforcedPowerLimit(h))

    def _op_energy_mj(self, nv: Any, h: Any, i: int) -> int:
        return int(nv.nvmlDeviceGetTotalEnergyConsumption(h))

    def _op_sm_clock_mhz(self, nv: Any, h: Any, i: int) -> int:
        return int(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM))

    def _op_mem_clock_mhz(self, nv: Any, h: Any, i: int) -> int:
        return int(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM))

    def _op_max_sm_clock_mhz(self, nv: Any, h: Any, i: int) -> int:
        return int(nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM))

    def _op_temperature_c(self, nv: Any, h: Any, i: int) -> int:
        return int(nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU))

    def _op_throttle_mask(self, nv: Any, h: Any, i: int) -> int:
        fn = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
        if fn is None:
            fn = nv.nvmlDeviceGetCurrentClocksThrottleReasons
        return int(fn(h))

    def _op_pcie_tx_kb_s(self, nv: Any, h: Any, i: int) -> int:
        return int(nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_TX_BYTES))

    def _op_pcie_rx_kb_s(self, nv: Any, h: Any, i: int) -> int:
        return int(nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_RX_BYTES))

    def _op_nvlink_kib(self, nv: Any, h: Any, i: int) -> dict[str, int]:
        # scopeId 0 with the THROUGHPUT_DATA fields reads the device's total data counters.
        ids = [nv.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, nv.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX]
        values = nv.nvmlDeviceGetFieldValues(h, ids)
        out: dict[str, int] = {}
        for key, fv in zip(("tx", "rx"), values, strict=True):
            if fv.nvmlReturn != nv.NVML_SUCCESS:
                raise nv.NVMLError(fv.nvmlReturn)
            out[key] = int(fv.value.ullVal)
        return out

    def _op_processes(self, nv: Any, h: Any, i: int) -> list[dict[str, Any]]:
        out = []
        for p in nv.nvmlDeviceGetComputeRunningProcesses(h):
            used = getattr(p, "usedGpuMemory", None)
            out.append({"pid": int(p.pid), "used_memory_b": None if used is None else int(used)})
        return out

    def _op_gpm_supported(self, nv: Any, h: Any, i: int) -> bool:
        return bool(nv.nvmlGpmQueryDeviceSupport(h).isSupportedDevice)

    def _op_gpm(self, nv: Any, h: Any, i: int) -> dict[str, float] | None:
        sample = nv.nvmlGpmSampleAlloc()
        try:
            nv.nvmlGpmSampleGet(h, sample)
        except Exception:
            nv.nvmlGpmSampleFree(sample)
            raise
        prev = self._gpm_prev.get(i)
        self._gpm_prev[i] = sample
        if prev is None:
            return None
        try:
            return self._gpm_between(nv, prev, sample)
        finally:
            nv.nvmlGpmSampleFree(prev)

    @staticmethod
    def _gpm_between(nv: Any, first: Any, second: Any) -> dict[str, float]:
        wanted = {
            "sm_util": nv.NVML_GPM_METRIC_SM_UTIL,
            "sm_occupancy": nv.NVML_GPM_METRIC_SM_OCCUPANCY,
            "any_tensor_util": nv.NVML_GPM_METRIC_ANY_TENSOR_UTIL,
            "dram_bw_util": nv.NVML_GPM_METRIC_DRAM_BW_UTIL,
        }
        request = nv.c_nvmlGpmMetricsGet_t()
        request.version = nv.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(wanted)
        request.sample1 = first
        request.sample2 = second
        for slot, metric_id in enumerate(wanted.values()):
            request.metrics[slot].metricId = metric_id
        nv.nvmlGpmMetricsGet(request)
        out: dict[str, float] = {}
        for slot, key in enumerate(wanted):
            metric = request.metrics[slot]
            if metric.nvmlReturn == nv.NVML_SUCCESS:
                out[key] = float(metric.value)
        return out

    def _op_mig_uuids(self, nv: Any, h: Any, i: int) -> list[str]:
        try:
            current, _pending = nv.nvmlDeviceGetMigMode(h)
        except Exception:  # noqa: BLE001 - no MIG on this card
            return []
        if not current:
            return []
        out = []
        for slot in range(int(nv.nvmlDeviceGetMaxMigDeviceCount(h))):
            try:
                mig = nv.nvmlDeviceGetMigDeviceHandleByIndex(h, slot)
            except Exception:  # noqa: BLE001 - an empty slot
                continue
            out.append(self._text(nv.nvmlDeviceGetUUID(mig)))
        return out
