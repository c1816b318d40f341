"""AMD GPUs through AMD SMI (`amdsmi`), behind the same `Backend.query(index, op)` seam as NVML.

Why the same seam: the GPU sampler, its rows and the engine stay one code path for both vendors;
this module only says how each op is answered by AMD SMI, in NVML's units (milliwatts,
millijoules, percent, bytes, MHz). What AMD SMI cannot answer raises `AmdSmiError` with a reason
that names AMD SMI, so the field is absent with that reason, never guessed:

- matrix-core activity: AMD SMI has no counter for it (NVML's GPM `any_tensor_util`), so
  `tensor_active` and therefore OFU are absent on AMD, with the reason;
- NVML's clocks-event bitmask, PCIe KB/s over a window and NVLink counters have no AMD SMI
  equivalent in these units: absent with the reason.

`amdsmi` is imported on `init`, or passed in (the fake in `amd_fake.py` replays recorded
answers through the same calls). Any exception becomes an `AmdSmiError`, so a broken driver
costs a field, never the run.
"""

from __future__ import annotations

import threading
from typing import Any

from .backend import GpuError

NO_MATRIX_COUNTER = (
    "AMD SMI exposes no matrix-core activity counter (NVML GPM's tensor activity has no AMD "
    "equivalent), so tensor activity and OFU are absent on AMD GPUs"
)


class AmdSmiError(GpuError):
    """An AMD SMI call failed, or AMD SMI has no answer for an op (`Amd...` names)."""

    library = "AMD SMI"


def _error(exc: BaseException) -> AmdSmiError:
    """AMD SMI's exception -> an AmdSmiError whose reason names AMD SMI."""
    text = f"{type(exc).__name__}: {exc}"
    if "NOT_SUPPORTED" in text.upper() or "NOT SUPPORTED" in text.upper():
        return AmdSmiError("AmdNotSupported")
    if "NO_PERM" in text.upper():
        return AmdSmiError("NoPermission")
    return AmdSmiError("AmdError", text[:200])


class AmdsmiBackend:
    """AMD SMI answering the GPU sampler's ops. `amdsmi`: the module (None: import it)."""

    def __init__(self, amdsmi: Any = None) -> None:
        self._given = amdsmi
        self._smi: Any = None
        self._handles: list[Any] = []
        self._lock = threading.Lock()

    def init(self) -> None:
        smi = self._given
        if smi is None:
            try:
                import amdsmi as smi  # type: ignore[import-not-found, no-redef]
            except ImportError:
                raise AmdSmiError("AmdNoBinding") from None
        try:
            smi.amdsmi_init()
            self._handles = list(smi.amdsmi_get_processor_handles())
        except Exception as exc:  # noqa: BLE001 - every failure is a reason, never a crash
            raise AmdSmiError("AmdNoDriver", _error(exc).detail) from None
        self._smi = smi

    def shutdown(self) -> None:
        smi, self._smi = self._smi, None
        if smi is None:
            return
        try:
            smi.amdsmi_shut_down()
        except Exception:  # noqa: BLE001 - shutting down: the driver may be gone
            pass

    def versions(self) -> dict[str, Any]:
        smi = self._need()
        out: dict[str, Any] = {}
        try:
            lib = smi.amdsmi_get_lib_version()
            out["amdsmi"] = ".".join(str(lib[k]) for k in ("major", "minor", "release") if k in lib)
        except Exception:  # noqa: BLE001 - an older library lacks it: the version stays unknown
            pass
        if self._handles:
            try:
                out["driver"] = smi.amdsmi_get_gpu_driver_info(self._handles[0])["driver_version"]
            except Exception:  # noqa: BLE001 - likewise
                pass
        return out

    def device_count(self) -> int:
        self._need()
        return len(self._handles)

    def query(self, index: int, op: str) -> Any:
        smi = self._need()
        if not 0 <= index < len(self._handles):
            raise AmdSmiError("InvalidArgument", f"no device {index}")
        method = getattr(self, f"_op_{op}", None)
        if method is None:
            raise AmdSmiError("AmdNotSupported", f"no AMD SMI equivalent of {op}")
        with self._lock:
            try:
                return method(smi, self._handles[index])
            except AmdSmiError:
                raise
            except Exception as exc:  # noqa: BLE001 - mapped to a reason, see module docstring
                raise _error(exc) from None

    def _need(self) -> Any:
        if self._smi is None:
            raise AmdSmiError("Uninitialized")
        return self._smi

    # -- ops, in NVML's units ----------------------------------------------------------------
    def _op_name(self, smi: Any, h: Any) -> str:
        return str(smi.amdsmi_get_gpu_asic_info(h)["market_name"])

    def _op_uuid(self, smi: Any, h: Any) -> str:
        return str(smi.amdsmi_get_gpu_device_uuid(h))

    def _op_mig_uuids(self, smi: Any, h: Any) -> list[str]:
        return []  # AMD's compute partitions appear as devices of their own

    def _op_memory(self, smi: Any, h: Any) -> dict[str, int]:
        vram = smi.amdsmi_get_gpu_vram_usage(h)  # MB
        return {"used": int(vram["vram_used"]) * 2**20, "total": int(vram["vram_total"]) * 2**20}

    def _op_utilization(self, smi: Any, h: Any) -> dict[str, float]:
        activity = smi.amdsmi_get_gpu_activity(h)  # percent
        gfx, umc = activity.get("gfx_activity"), activity.get("umc_activity")
        if not isinstance(gfx, (int, float)) or not isinstance(umc, (int, float)):
            raise AmdSmiError("AmdNotSupported", "activity reads N/A")
        return {"gpu": gfx, "memory": umc}

    def _op_power_mw(self, smi: Any, h: Any) -> int:
        info = smi.amdsmi_get_power_info(h)  # watts
        for key in ("current_socket_power", "average_socket_power"):
            value = info.get(key)
            if isinstance(value, (int, float)) and value > 0:
                return int(value * 1000)
        raise AmdSmiError("AmdNotSupported", "socket power reads N/A")

    def _op_power_limit_mw(self, smi: Any, h: Any) -> int:
        cap = smi.amdsmi_get_power_cap_info(h)["power_cap"]  # microwatts
        return int(cap) // 1000

    def _op_energy_mj(self, smi: Any, h: Any) -> float:
        energy = smi.amdsmi_get_energy_count(h)
        count = energy.get("energy_accumulator", energy.get("power"))  # older bindings: "power"
        return float(count) * float(energy["counter_resolution"]) / 1000.0  # µJ -> mJ

    def _op_sm_clock_mhz(self, smi: Any, h: Any) -> int:
        return int(smi.amdsmi_get_clock_info(h, smi.AmdSmiClkType.GFX)["clk"])

    def _op_max_sm_clock_mhz(self, smi: Any, h: Any) -> int:
        return int(smi.amdsmi_get_clock_info(h, smi.AmdSmiClkType.GFX)["max_clk"])

    def _op_mem_clock_mhz(self, smi: Any, h: Any) -> int:
        return int(smi.amdsmi_get_clock_info(h, smi.AmdSmiClkType.MEM)["clk"])

    def _op_temperature_c(self, smi: Any, h: Any) -> int:
        return int(
            smi.amdsmi_get_temp_metric(
                h, smi.AmdSmiTemperatureType.HOTSPOT, smi.AmdSmiTemperatureMetric.CURRENT
            )
        )

    def _op_processes(self, smi: Any, h: Any) -> list[dict[str, Any]]:
        out = []
        for proc in smi.amdsmi_get_gpu_process_list(h):
            if not isinstance(proc, dict):  # old bindings list handles, not infos
                raise AmdSmiError("AmdNotSupported", "this amdsmi lists process handles only")
            vram = (proc.get("memory_usage") or {}).get("vram_mem")
            out.append({"pid": int(proc["pid"]), "used_memory_b": vram})
        return out

    def _op_gpm_supported(self, smi: Any, h: Any) -> bool:
        raise AmdSmiError("AmdNoMatrixCounter")
