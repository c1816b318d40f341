"""`sample.gpu` payloads: one row per selected GPU, from the card's library (`families.py`
picks NVML or AMD SMI; both answer in NVML's units) and, on Hopper and newer, NVML's GPM.

Conversions to the record's units (docs/architecture.md): percents become fractions, mW -> W,
mJ -> J, PCIe KB/s -> bytes/s (NVML's KB is 1024 bytes), NVLink cumulative KiB counters become
bytes/s between two samples, GPM percentages over the window between two `sample()` calls
become fractions with that `window_s`. What a card cannot give is left out of the row and named
in `missing` with the reason; nothing is ever filled with zero.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ...hardware.measured_peaks import read_peak
from ...payloads import SAMPLE_GPU
from .backend import Backend, GpuError
from .dcgm import dcgm_reason
from .families import backend_from_env
from .select import Device, select

THROTTLE_BITS = (
    (0x1, "idle"),
    (0x2, "applications_clocks"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake"),
    (0x100, "display_clocks"),
    (0x200, "board_limit"),
    (0x400, "reliability"),
)

#: Which row fields each op feeds, so a failing op names every field it leaves out.
OP_FIELDS = {
    "utilization": ("gpu_util", "mem_util"),
    "memory": ("memory_used_b", "memory_total_b"),
    "power_mw": ("power_w",),
    "power_limit_mw": ("power_limit_w",),
    "energy_mj": ("energy_j",),
    "sm_clock_mhz": ("sm_clock_mhz",),
    "max_sm_clock_mhz": ("max_sm_clock_mhz",),
    "mem_clock_mhz": ("mem_clock_mhz",),
    "temperature_c": ("temperature_c",),
    "throttle_mask": ("throttle",),
    "pcie_tx_kb_s": ("pcie_tx_b_s",),
    "pcie_rx_kb_s": ("pcie_rx_b_s",),
    "nvlink_kib": ("nvlink_tx_b_s", "nvlink_rx_b_s"),
    "processes": ("processes",),
}
GPM_FIELDS = ("sm_active", "sm_occupancy", "tensor_active", "dram_active", "window_s")
NO_GPM_CARD = "this card has no GPM (NVML GPM needs a Hopper or newer data-center GPU)"


def decode_throttle(mask: int) -> list[str]:
    """NVML clocks-event bitmask -> reason names; unknown bits kept as `bit_0x...`."""
    names = [name for bit, name in THROTTLE_BITS if mask & bit]
    known = 0
    for bit, _ in THROTTLE_BITS:
        known |= bit
    rest = mask & ~known
    bit = 1
    while rest:
        if rest & bit:
            names.append(f"bit_{bit:#x}")
            rest &= ~bit
        bit <<= 1
    return names


def _fraction(percent: float) -> float:
    return min(max(float(percent) / 100.0, 0.0), 1.0)


class _Lost(Exception):
    """The GPU fell off: stop asking it anything."""


class _DeviceState:
    """What persists between samples for one GPU: identity, GPM arming, counter baselines."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.lost_reason: str | None = None
        self.gpm_reason: str | None = None  # None: armed
        self.gpm_prev_t: float | None = None
        self.nvlink_prev: tuple[float, dict[str, int]] | None = None
        self.max_sm_clock: int | None = None
        self.peak: dict[str, Any] | None = None
        self.identity_missing: dict[str, str] = {}


class GpuSampler:
    """Samples the run's GPUs. Construct cheaply; the GPU library is opened on the first
    `sample()`."""

    kind = SAMPLE_GPU.name

    def __init__(
        self,
        backend: Backend | None = None,
        gpus: str | list[str] | None = None,
        env: Mapping[str, str] | None = None,
        tree_pids: Callable[[], Iterable[int]] | None = None,
        clock: Callable[[], float] = time.monotonic,
        process_names: Callable[[], Iterable[str]] | None = None,
        hostname: str | None = None,
        read_text: Callable[[str], str | None] | None = None,
    ) -> None:
        self.env = dict(env) if env is not None else {}
        self.backend: Backend = backend if backend is not None else backend_from_env(self.env)
        self.gpus = gpus
        self.tree_pids = tree_pids or (lambda: ())
        self.clock = clock
        self.process_names = process_names
        self.hostname = hostname or socket.gethostname()
        self.read_text = read_text
        self._opened = False
        self._unavailable: str | None = None
        self._versions: dict[str, Any] = {}
        self._states: list[_DeviceState] = []

    # -- public ---------------------------------------------------------------------------
    def sample(self) -> dict[str, Any]:
        try:
            return self._sample()
        except Exception as exc:  # noqa: BLE001 - a sampler never raises into the supervisor
            return {"unavailable": f"GPU sampler failed: {type(exc).__name__}: {exc}"}

    def close(self) -> None:
        if self._opened:
            self._opened = False
            try:
                self.backend.shutdown()
            except Exception:  # noqa: BLE001 - shutting down: the driver may be gone
                pass

    # -- opening --------------------------------------------------------------------------
    def _open(self) -> None:
        if self._opened or self._unavailable:
            return
        try:
            self.backend.init()
        except GpuError as exc:
            self._unavailable = exc.reason
            return
        self._opened = True
        try:
            self._versions = self.backend.versions()
        except GpuError:
            self._versions = {}
        try:
            count = self.backend.device_count()
        except GpuError as exc:
            self._unavailable = f"{exc.library} lists no devices: {exc.reason}"
            return
        dcgm = dcgm_reason(self.process_names)
        for index in range(count):
            self._states.append(self._open_device(index, dcgm))

    def _open_device(self, index: int, dcgm: str | None) -> _DeviceState:
        ident: dict[str, Any] = {}
        missing: dict[str, str] = {}
        lost: GpuError | None = None
        for op in ("name", "uuid", "mig_uuids"):
            try:
                ident[op] = self.backend.query(index, op)
            except GpuError as exc:
                missing[op] = exc.reason
                if exc.name == "GpuIsLost" and lost is None:
                    lost = exc
        state = _DeviceState(
            Device(
                index=index,
                uuid=str(ident.get("uuid") or ""),
                mig_uuids=tuple(ident.get("mig_uuids") or ()),
                name=str(ident.get("name") or ""),
            )
        )
        state.identity_missing = {k: v for k, v in missing.items() if k != "mig_uuids"}
        if lost is not None:
            state.lost_reason = type(lost)(lost.name).reason  # the reason, without the detail
        if dcgm:
            state.gpm_reason = dcgm
        else:
            try:
                supported = self.backend.query(index, "gpm_supported")
            except GpuError as exc:
                state.gpm_reason = NO_GPM_CARD if exc.name == "NotSupported" else exc.reason
            else:
                state.gpm_reason = None if supported else NO_GPM_CARD
        if state.device.uuid:
            kw = {"read_text": self.read_text} if self.read_text else {}
            state.peak = read_peak(state.device.uuid, self.hostname, self.env, **kw)
        return state

    # -- sampling -------------------------------------------------------------------------
    def _sample(self) -> dict[str, Any]:
        self._open()
        if self._unavailable:
            return {"unavailable": self._unavailable}
        now = self.clock()
        live = [s for s in self._states if s.lost_reason is None]
        dynamic = not self.gpus and "CUDA_VISIBLE_DEVICES" not in self.env
        processes: dict[int, list[dict[str, Any]] | GpuError] = {}
        if dynamic:
            for state in live:
                processes[state.device.index] = self._processes(state)
        gpu_pids = {
            i: [p["pid"] for p in procs]
            for i, procs in processes.items()
            if not isinstance(procs, GpuError)
        }
        tree = set(self.tree_pids()) if dynamic else set()
        selection = select([s.device for s in self._states], self.gpus, self.env, tree, gpu_pids)
        rows = []
        for index in selection.indices:
            state = self._states[index]
            rows.append(self._row(state, now, processes.get(index)))
        out: dict[str, Any] = {
            "gpus": rows,
            "selected_by": selection.selected_by,
            "selected": list(selection.indices),
            "versions": self._versions_out(),
        }
        if selection.note:
            out["selection_note"] = selection.note
        chosen = [self._states[i] for i in selection.indices]
        if chosen and all(s.gpm_reason for s in chosen):
            out["gpm_unavailable"] = chosen[0].gpm_reason
        elif not chosen:
            out["gpm_unavailable"] = "no GPU selected"
        return out

    def _versions_out(self) -> dict[str, Any]:
        out = dict(self._versions)
        cuda = out.get("cuda")
        if isinstance(cuda, int):  # NVML gives 12040 for CUDA 12.4
            out["cuda"] = f"{cuda // 1000}.{(cuda % 1000) // 10}"
        return out

    def _processes(self, state: _DeviceState) -> list[dict[str, Any]] | GpuError:
        try:
            return list(self.backend.query(state.device.index, "processes"))
        except GpuError as exc:
            if exc.name == "GpuIsLost":
                state.lost_reason = exc.reason
            return exc

    def _ask(self, state: _DeviceState, op: str, missing: dict[str, str]) -> Any:
        """One op; on failure its fields go to `missing`. A lost GPU aborts the row."""
        try:
            return self.backend.query(state.device.index, op)
        except GpuError as exc:
            if exc.name == "GpuIsLost":
                state.lost_reason = exc.reason
                raise _Lost() from None
            for name in OP_FIELDS.get(op, (op,)):
                missing[name] = exc.reason
            return None

    def _row(
        self,
        state: _DeviceState,
        now: float,
        procs: list[dict[str, Any]] | GpuError | None,
    ) -> dict[str, Any]:
        dev = state.device
        row: dict[str, Any] = {"index": dev.index, "uuid": dev.uuid, "name": dev.name}
        missing: dict[str, str] = dict(state.identity_missing)
        if state.lost_reason is None:
            try:
                self._fill(state, now, row, missing, procs)
            except _Lost:
                pass
        if state.lost_reason is not None:
            row["lost"] = True
            for fields in OP_FIELDS.values():
                for name in fields:
                    if name not in row:
                        missing[name] = state.lost_reason
            for name in GPM_FIELDS:
                if name not in row:
                    missing[name] = state.lost_reason
        if state.peak:
            row.update(state.peak)
        if missing:
            row["missing"] = missing
        return row

    def _fill(
        self,
        state: _DeviceState,
        now: float,
        row: dict[str, Any],
        missing: dict[str, str],
        procs: list[dict[str, Any]] | GpuError | None,
    ) -> None:
        """Every NVML field of one row; GPM last (its window is the time between calls)."""
        util = self._ask(state, "utilization", missing)
        if util is not None:
            row["gpu_util"] = _fraction(util["gpu"])
            row["mem_util"] = _fraction(util["memory"])
        mem = self._ask(state, "memory", missing)
        if mem is not None:
            row["memory_used_b"] = int(mem["used"])
            row["memory_total_b"] = int(mem["total"])
        for op, key, scale in (
            ("power_mw", "power_w", 1e-3),
            ("power_limit_mw", "power_limit_w", 1e-3),
            ("energy_mj", "energy_j", 1e-3),
            ("pcie_tx_kb_s", "pcie_tx_b_s", 1024),
            ("pcie_rx_kb_s", "pcie_rx_b_s", 1024),
        ):
            value = self._ask(state, op, missing)
            if value is not None:
                row[key] = value * scale
        for op in ("sm_clock_mhz", "mem_clock_mhz", "temperature_c"):
            value = self._ask(state, op, missing)
            if value is not None:
                row[op] = int(value)
        if state.max_sm_clock is None:
            state.max_sm_clock = self._ask(state, "max_sm_clock_mhz", missing)
        if state.max_sm_clock is not None:
            row["max_sm_clock_mhz"] = int(state.max_sm_clock)
        mask = self._ask(state, "throttle_mask", missing)
        if mask is not None:
            row["throttle"] = decode_throttle(int(mask))
        self._nvlink(state, now, row, missing)
        if procs is None:
            procs = self._processes(state)
            if state.lost_reason is not None:
                raise _Lost()
        if isinstance(procs, GpuError):
            missing["processes"] = procs.reason
        else:
            row["processes"] = procs
        self._gpm(state, now, row, missing)

    def _nvlink(
        self, state: _DeviceState, now: float, row: dict[str, Any], missing: dict[str, str]
    ) -> None:
        """NVLink bytes/s from the cumulative KiB counters of this and the previous sample."""
        counters = self._ask(state, "nvlink_kib", missing)
        if counters is None:
            return
        prev, state.nvlink_prev = state.nvlink_prev, (now, dict(counters))
        if prev is None:
            reason = "NVLink rates need two samples; the window starts here"
        elif now <= prev[0]:
            reason = "no time passed since the previous sample"
        elif any(counters[k] < prev[1].get(k, 0) for k in ("tx", "rx")):
            reason = "NVLink counters went backwards (reset); the window restarts here"
        else:
            dt = now - prev[0]
            row["nvlink_tx_b_s"] = (counters["tx"] - prev[1]["tx"]) * 1024 / dt
            row["nvlink_rx_b_s"] = (counters["rx"] - prev[1]["rx"]) * 1024 / dt
            return
        missing["nvlink_tx_b_s"] = missing["nvlink_rx_b_s"] = reason

    def _gpm(
        self, state: _DeviceState, now: float, row: dict[str, Any], missing: dict[str, str]
    ) -> None:
        """GPM fractions over the window since this GPU's previous successful GPM sample."""
        if state.gpm_reason:
            for name in GPM_FIELDS:
                missing[name] = state.gpm_reason
            return
        try:
            metrics = self.backend.query(state.device.index, "gpm")
        except GpuError as exc:
            if exc.name == "GpuIsLost":
                state.lost_reason = exc.reason
                raise _Lost() from None
            state.gpm_prev_t = None
            if exc.name == "InUse":  # another client (DCGM, a profiler) took the counters
                state.gpm_reason = f"GPM disarmed: {exc.reason}"
            for name in GPM_FIELDS:
                missing[name] = state.gpm_reason or f"GPM sample failed: {exc.reason}"
            return
        prev_t, state.gpm_prev_t = state.gpm_prev_t, now
        if metrics is None or prev_t is None:
            for name in GPM_FIELDS:
                missing[name] = "GPM needs two samples; its window starts at this one"
            return
        row["window_s"] = now - prev_t
        for src, dst in (
            ("sm_util", "sm_active"),
            ("sm_occupancy", "sm_occupancy"),
            ("any_tensor_util", "tensor_active"),
            ("dram_bw_util", "dram_active"),
        ):
            if src in metrics:
                row[dst] = _fraction(metrics[src])
            else:
                missing[dst] = "GPM did not return this metric on this card"
