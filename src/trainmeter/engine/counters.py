"""What the GPUs themselves report: the utilization ladder, OFU, observed FLOPs, intensity.

The ladder (GPU-Util, SM active, tensor active, OFU, MFU) shows where a GPU that reads "100%
busy" stops doing useful work. OFU is measured, MFU is modelled; OFU is compared with MFU only
when the card's spec states the tensor clock its dense peak is quoted at (else the gap is not
meaningful and is left out). Observed FLOPs = sum over samples and GPUs of OFU x the card's
datasheet dense peak x the sample's window. Arithmetic intensity = ridge x MFU / DRAM active.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..hardware.specs import DeviceSpec
from . import formulas
from .energy import EnergyMeter
from .formulas import MovingAverage, num

LADDER = ("gpu_util", "sm_active", "tensor_active", "ofu")
_ROW_FIELDS = (
    "gpu_util",
    "mem_util",
    "sm_active",
    "sm_occupancy",
    "tensor_active",
    "dram_active",
    "memory_used_b",
    "memory_total_b",
    "power_w",
    "power_limit_w",
    "sm_clock_mhz",
    "max_sm_clock_mhz",
    "temperature_c",
    "pcie_tx_b_s",
    "pcie_rx_b_s",
    "nvlink_tx_b_s",
    "nvlink_rx_b_s",
)


class GpuCounters:
    def __init__(self, lookup: Callable[[str], DeviceSpec | None]) -> None:
        self._lookup = lookup
        self.unavailable: str | None = None
        self.gpm_unavailable: str | None = None
        self.selected_by: str | None = None
        self.versions: dict[str, Any] = {}
        self.devices: dict[Any, dict[str, Any]] = {}
        self.samples = 0
        self._ladder: dict[Any, dict[str, float]] = {}
        self._rows: dict[Any, dict[str, Any]] = {}
        self._ofu = MovingAverage(0.2, 0)
        self._dram = MovingAverage(0.2, 0)
        self._comparable = True
        self.observed_flops = 0.0
        self._observed_unknown: str | None = None
        self.throttle: dict[Any, tuple[list[str], float]] = {}
        self.measured_peaks: dict[Any, tuple[float, str | None]] = {}
        self.energy = EnergyMeter()

    def sample(self, t: float, d: dict[str, Any]) -> None:
        if "unavailable" in d:
            self.unavailable = str(d["unavailable"])
            return
        self.unavailable = None
        self.samples += 1
        if isinstance(d.get("selected_by"), str):
            self.selected_by = d["selected_by"]
        if isinstance(d.get("versions"), dict):
            self.versions = dict(d["versions"])
        gpm = d.get("gpm_unavailable")
        self.gpm_unavailable = str(gpm) if gpm else None
        ofus: list[float] = []
        drams: list[float] = []
        for row in d.get("gpus") or []:
            if isinstance(row, dict):
                self._row(t, row, ofus, drams)
        if ofus:
            self._ofu.update(sum(ofus) / len(ofus))
        if drams:
            self._dram.update(sum(drams) / len(drams))

    def _row(self, t: float, row: dict[str, Any], ofus: list[float], drams: list[float]) -> None:
        index, uuid, name = row.get("index"), row.get("uuid"), row.get("name")
        ident = uuid or index
        label = str(index if index is not None else uuid)
        self.devices[ident] = {"name": name, "index": index, "uuid": uuid}
        spec = self._lookup(name) if isinstance(name, str) else None
        rungs = {
            k: v
            for k in ("gpu_util", "sm_active", "tensor_active")
            if (v := num(row.get(k))) is not None
        }
        tensor, clock = num(row.get("tensor_active")), num(row.get("sm_clock_mhz"))
        if tensor is not None and clock is not None:
            got = formulas.ofu(
                tensor,
                clock,
                spec.tensor_clock_mhz if spec is not None else None,
                num(row.get("max_sm_clock_mhz")),
            )
            if got is not None:
                value, comparable = got
                rungs["ofu"] = value
                ofus.append(value)
                self._comparable = self._comparable and comparable
                self._observe(spec, name, value, num(row.get("window_s")))
        dram = num(row.get("dram_active"))
        if dram is not None:
            drams.append(dram)
        self._ladder[label] = rungs
        self._rows[label] = {k: row[k] for k in _ROW_FIELDS if num(row.get(k)) is not None}
        self._rows[label]["name"] = name
        reasons = row.get("throttle")
        if isinstance(reasons, list):
            self.throttle[label] = ([str(r) for r in reasons], t)
        peak = num(row.get("measured_peak_flops"))
        if peak is not None:
            source = row.get("measured_peak_source")
            self.measured_peaks[ident] = (peak, source if isinstance(source, str) else None)
        self.energy.read(ident, label, row.get("energy_j"))

    def _observe(
        self, spec: DeviceSpec | None, name: Any, ofu: float, window: float | None
    ) -> None:
        if spec is None or spec.bf16_dense_flops is None:
            self._observed_unknown = f"{name or 'a GPU'} has no datasheet dense peak in the table"
        elif window is not None and window > 0:
            self.observed_flops += ofu * spec.bf16_dense_flops * window

    @property
    def ofu(self) -> float | None:
        return self._ofu.value

    @property
    def comparable(self) -> bool:
        return self._comparable

    def snapshot(
        self, snap: dict[str, Any], peak: dict[str, Any] | None, absent: dict[str, str]
    ) -> None:
        """Add ladder, gpus, ofu, flops_observed, mfu_ofu_gap, arithmetic_intensity to `snap`."""
        mfu = snap.get("mfu") or {}
        self._ladder_into(snap, mfu.get("value"), absent)
        self._ofu_into(snap, mfu, absent)
        self._intensity_into(snap, (peak or {}).get("ridge"), mfu, absent)

    def _ladder_into(self, snap: dict[str, Any], mfu: float | None, absent: dict[str, str]) -> None:
        if self.unavailable is not None:
            absent["ladder"] = f"no GPU counters: {self.unavailable}"
            return
        if not self._ladder:
            absent["ladder"] = "no GPU sample yet (tm samples NVML once a second)"
            return
        top = {} if mfu is None else {"mfu": mfu}
        per_gpu = {label: {**rungs, **top} for label, rungs in sorted(self._ladder.items(), key=formulas.by_gpu)}
        mean: dict[str, float] = {}
        for rung in LADDER:
            got = [rungs[rung] for rungs in self._ladder.values() if rung in rungs]
            if got:
                mean[rung] = sum(got) / len(got)
        snap["ladder"] = {"gpus": per_gpu, "mean": {**mean, **top}, "mfu": mfu}
        snap["gpus"] = {label: dict(row) for label, row in sorted(self._rows.items(), key=formulas.by_gpu)}

    def _ofu_into(self, snap: dict[str, Any], mfu: dict[str, Any], absent: dict[str, str]) -> None:
        value = self._ofu.value
        if value is None:
            why = (
                self.unavailable
                or self.gpm_unavailable
                or "no tensor-activity sample yet (GPM needs a Hopper or newer GPU)"
            )
            absent.update(ofu=why, flops_observed=why, mfu_ofu_gap=why)
            return
        entry = dict(
            value=value, convention="counters", source="measured",
            comparable_with_mfu=self._comparable,
        )  # fmt: skip
        if not self._comparable:
            entry["note"] = (
                "scaled to the max SM clock: the spec states no tensor clock for the dense "
                "peak, so OFU is not compared with MFU"
            )
        snap["ofu"] = entry
        if self._observed_unknown is None:
            snap["flops_observed"] = dict(
                value=self.observed_flops, convention="counters",
                note="approximate: counts recompute and padding too",
            )  # fmt: skip
        else:
            absent["flops_observed"] = self._observed_unknown
        mfu_value = mfu.get("value")
        if mfu_value is None:
            absent["mfu_ofu_gap"] = "needs MFU under a chosen convention"
        elif not self._comparable:
            absent["mfu_ofu_gap"] = "OFU is not comparable: no tensor clock in the spec"
        else:
            snap["mfu_ofu_gap"] = dict(
                value=value - mfu_value, ofu="counters", mfu=mfu.get("convention")
            )

    def _intensity_into(
        self,
        snap: dict[str, Any],
        ridge: float | None,
        mfu: dict[str, Any],
        absent: dict[str, str],
    ) -> None:
        """FLOP per DRAM byte over the window; the first unmet need is the absent reason."""
        dram, mfu_value = self._dram.value, mfu.get("value")
        needs = (
            (mfu_value is None, "needs MFU under a chosen convention"),
            (
                dram is None,
                self.unavailable or self.gpm_unavailable or "needs a DRAM-activity sample",
            ),
            (not ridge, "needs the card's memory bandwidth in the spec table"),
            (dram is not None and dram <= 0, "the DRAM was idle over the window"),
        )
        for unmet, why in needs:
            if unmet:
                absent["arithmetic_intensity"] = why
                return
        snap["arithmetic_intensity"] = dict(
            value=formulas.arithmetic_intensity(ridge, mfu_value, dram),  # type: ignore[arg-type]
            unit="FLOP/byte", convention=mfu.get("convention"),
            note="aggregate over the sampling window, not per kernel",
        )  # fmt: skip
