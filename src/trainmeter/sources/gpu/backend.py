"""The one seam between trainmeter and a GPU library, whatever the vendor.

Every question the GPU sampler asks goes through `Backend.query(index, op)`, which returns a
plain JSON-able value or raises `GpuError` with the library's short error name. Keeping the
surface this small is what lets a fake backend replay recorded answers, the recorder write them
down, and `tm hardware --dump` pack them into a bug report: all speak the same op names, in
NVML's units.

Each device family is one door behind this seam: NVIDIA through NVML (`nvml.py`, its fake
`fake.py`), AMD through AMD SMI (`amd.py`, its fake `amd_fake.py`); `families.py` is the one
place that picks which answers. A door turns every failure into its `GpuError` subclass, so a
broken driver or an old binding can only ever cost a field, never the run.
"""

from __future__ import annotations

from typing import Any, Protocol

#: Ops a device answers. Units are NVML's own; the sampler converts them.
OPS = (
    "name",  # str
    "uuid",  # str, "GPU-..."
    "memory",  # {"used": bytes, "total": bytes}
    "utilization",  # {"gpu": percent, "memory": percent}
    "power_mw",  # int, milliwatts
    "power_limit_mw",  # int, milliwatts (enforced limit)
    "energy_mj",  # int, millijoules since the driver loaded
    "sm_clock_mhz",
    "mem_clock_mhz",
    "max_sm_clock_mhz",
    "temperature_c",
    "throttle_mask",  # int, nvmlClocksEventReasons bitmask
    "pcie_tx_kb_s",  # int, KB/s over NVML's 20 ms window
    "pcie_rx_kb_s",
    "nvlink_kib",  # {"tx": KiB, "rx": KiB}, cumulative data counters (all links)
    "processes",  # [{"pid": int, "used_memory_b": int | None}]
    "gpm_supported",  # bool
    "gpm",  # {"sm_util", "sm_occupancy", "any_tensor_util", "dram_bw_util"} percents since the
    #         previous "gpm" call on this device, or None on the first call
    "mig_uuids",  # [str] MIG device UUIDs under this GPU (empty when MIG is off)
)

#: Human reasons for each library's error names, used in `missing` and `unavailable`. A name
#: recorded from one library and replayed by another's fake (an AMD dump in an NVML fixture)
#: is looked up in every table.
REASONS: dict[str, dict[str, str]] = {
    "NVML": {
        "LibraryNotFound": "NVML library not found (no NVIDIA driver on this machine)",
        "DriverNotLoaded": "the NVIDIA driver is not loaded",
        "NoPermission": "NVML refused: insufficient permissions",
        "NotSupported": "not supported on this card (NVML NotSupported)",
        "FunctionNotFound": "this driver's NVML lacks the function (driver too old)",
        "GpuIsLost": "the GPU is lost (fell off the bus or hung); needs a reset",
        "Unknown": "NVML returned an unknown error",
        "InUse": "the counters are in use by another client (DCGM or a profiler)",
        "Uninitialized": "NVML is not initialized",
        "NotFound": "NVML did not find it",
        "Timeout": "NVML timed out",
        "LibRmVersionMismatch": "NVML and the kernel driver versions differ (reboot or reload)",
        "ResetRequired": "the GPU requires a reset",
        "NoBinding": "the nvidia-ml-py package (pynvml) is not installed",
    },
    "AMD SMI": {
        "AmdNoBinding": "the amdsmi package (AMD SMI) is not installed",
        "AmdNoDriver": "AMD SMI could not start (no AMD GPU driver on this machine)",
        "AmdNotSupported": "not supported by AMD SMI on this card",
        "AmdNoMatrixCounter": (
            "AMD SMI exposes no matrix-core activity counter (NVML GPM's tensor activity has no "
            "AMD equivalent), so tensor activity and OFU are absent on AMD GPUs"
        ),
        "AmdError": "AMD SMI returned an error",
        "NoPermission": "AMD SMI refused: insufficient permissions",
        "Uninitialized": "AMD SMI is not initialized",
    },
}


class GpuError(Exception):
    """A GPU library call failed. `name` is the library's error name without its prefix
    (`NotSupported`, `AmdNoDriver`); each door raises its subclass, which names the library."""

    library = "GPU library"

    def __init__(self, name: str, detail: str = "") -> None:
        super().__init__(name if not detail else f"{name}: {detail}")
        self.name = name
        self.detail = detail

    @property
    def reason(self) -> str:
        base = REASONS.get(self.library, {}).get(self.name)
        if base is None:
            base = next((t[self.name] for t in REASONS.values() if self.name in t), None)
        if base is None:
            base = f"{self.library} error {self.name}"
        return f"{base}; {self.detail}" if self.detail else base


class Backend(Protocol):
    """What the GPU sampler needs from a GPU library: every door, fake and the recorder
    implement it."""

    def init(self) -> None: ...

    def shutdown(self) -> None: ...

    def versions(self) -> dict[str, Any]: ...

    def device_count(self) -> int: ...

    def query(self, index: int, op: str) -> Any: ...


