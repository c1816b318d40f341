"""What the GPUs themselves report: the utilization ladder, OFU, observed FLOPs, intensity.

The ladder (GPU-Util, SM active, tensor active, OFU, MFU) shows where a GPU that reads "100%
busy" stops doing useful work. OFU is measured, MFU is modelled; OFU is compared with MFU only
when the card's spec states the tensor clock its dense peak is quoted at (else the gap is not
meaningful and is left out). Observed FLOPs = sum over samples of OFU x the card's datasheet
dense peak x the sample's window. Arithmetic intensity = peak x MFU / (bandwidth x DRAM active).

Everything is kept per GPU and averaged or summed at snapshot time over the GPUs the training
uses (`covered`, chosen by `devices.py`): the same GPUs MFU divides by, whatever order the
device fact and the samples arrived in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import explain, formulas
from .energy import EnergyMeter
from .formulas import MovingAverage, num
from .section import Section

if TYPE_CHECKING:
    from ..hardware.specs import DeviceSpec

LADDER = ("gpu_util", "sm_active", "tensor_active", "ofu")
ALPHA = 0.2
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

#: The fields of a row read as numbers: those a row keeps (`_ROW_FIELDS`), the sample's window
#: and a measured peak. The others (index, uuid, name, energy, throttle) are read on their own.
_NUMERIC = frozenset((*_ROW_FIELDS, "window_s", "measured_peak_flops"))
_RUNGS = ("gpu_util", "sm_active", "tensor_active")
#: What `GpuCounters.section` gives beyond the ladder, the rows and OFU, from them
_DERIVED = frozenset(("flops_observed", "mfu_ofu_gap", "arithmetic_intensity"))


#: The types whose equal values print the same (`GpuCounters.layout`): 1, 1.0 and True are
#: equal, 0.0 and -0.0 too, so a value of any other type counts as changed each time.
_PLAIN = frozenset((str, int, type(None)))


class _Gpu:
    """One sampled GPU's running state. What only the latest row gives (`rungs`, `row`) is
    made from it when read (a sample or a snapshot, about once a second of a replay's run
    time), not at every row: the rest (the moving averages, the observed FLOPs) takes each."""

    __slots__ = (
        "label", "name", "spec", "spec_peak", "ofu", "dram", "ofu_seconds", "samples_counted",
        "comparable", "_rungs", "_row", "latest", "latest_ofu_inputs",
    )

    def __init__(self, label: str) -> None:
        self.label = label
        self.name: Any = None
        self.spec: DeviceSpec | None = None
        self.spec_peak: float | None = None
        self.ofu = MovingAverage(ALPHA, 0)
        self.dram = MovingAverage(ALPHA, 0)
        self.ofu_seconds = 0.0  # sum of OFU x window over samples: observed FLOPs / peak
        self.samples_counted = 0
        self.comparable = True
        self._rungs: dict[str, float] = {}
        self._row: dict[str, Any] = {}
        #: the latest row, its finite numbers and its OFU, until read (`_settle`)
        self.latest: tuple[dict[str, Any], dict[str, Any], float | None] | None = None
        self.latest_ofu_inputs: tuple[float, float, float, bool] | None = None

    @property
    def rungs(self) -> dict[str, float]:
        """The latest row's ladder: GPU-Util, SM active, tensor active, and its OFU."""
        if self.latest is not None:
            self._settle()
        return self._rungs

    @property
    def row(self) -> dict[str, Any]:
        """The latest row's fields that are finite numbers (`_ROW_FIELDS`), and its name."""
        if self.latest is not None:
            self._settle()
        return self._row

    def _settle(self) -> None:
        row, nums, ofu = self.latest  # type: ignore[misc]
        self.latest = None
        get = nums.get
        rungs = {k: v for k in _RUNGS if (v := get(k)) is not None}
        if ofu is not None:
            rungs["ofu"] = ofu
        self._rungs = rungs
        kept = {k: row[k] for k in _ROW_FIELDS if get(k) is not None}
        kept["name"] = row.get("name")
        self._row = kept


class GpuCounters:
    def __init__(self, lookup: Callable[[str], DeviceSpec | None]) -> None:
        self._lookup = lookup
        self.unavailable: str | None = None
        self.gpm_unavailable: str | None = None
        self.selected_by: str | None = None
        self.versions: dict[str, Any] = {}
        self.devices: dict[Any, dict[str, Any]] = {}
        self.samples = 0
        self._gpus: dict[Any, _Gpu] = {}
        self._every_memo: list[_Gpu] = []  # `_every`
        self._covered_memo: tuple[tuple[Any, int], list[_Gpu]] | None = None  # `_covered`
        self.throttle: dict[Any, tuple[list[str], float]] = {}
        self.measured_peaks: dict[Any, tuple[float, str | None]] = {}
        self.energy = EnergyMeter()
        #: grows when what `devices.section` reads of the sampled GPUs changes (`devices`,
        #: `selected_by`, `versions`, `measured_peaks`), not with every row that repeats them:
        #: a sample reuses the GPUs' part (their names, count and peak) while it stays
        self.layout = 0
        #: ident -> its row's (name, index, uuid); `layout` moves when one changes
        self._device_keys: dict[Any, tuple[Any, Any, Any]] = {}
        self._versions_items: tuple[tuple[Any, Any], ...] = ()

    def sample(self, t: float, d: dict[str, Any]) -> None:
        if "unavailable" in d:
            self.unavailable = str(d["unavailable"])
            return
        self.unavailable = None
        self.samples += 1
        by = d.get("selected_by")
        if isinstance(by, str) and (by != self.selected_by or type(by) is not str):
            self.selected_by = by
            self.layout += 1
        versions = d.get("versions")
        if isinstance(versions, dict):
            items = tuple(versions.items())  # in order: the snapshot prints them so
            if items != self._versions_items or not _PLAIN.issuperset(
                map(type, versions.values())
            ):
                self.versions = dict(versions)
                self._versions_items = items
                self.layout += 1
        gpm = d.get("gpm_unavailable")
        self.gpm_unavailable = str(gpm) if gpm else None
        for row in d.get("gpus") or []:
            if isinstance(row, dict):
                self._row(t, row)

    def _row(self, t: float, row: dict[str, Any]) -> None:
        index, uuid, name = row.get("index"), row.get("uuid"), row.get("name")
        ident = uuid or index
        label = str(index if index is not None else uuid)
        key = (name, index, uuid)
        if (  # a repeated row leaves them (the GPUs' part of a sample is then reused)
            key != self._device_keys.get(ident) or type(index) is not int
            or type(name) is not str or type(uuid) is not str
        ):
            self._device_keys[ident] = key
            self.devices[ident] = {"name": name, "index": index, "uuid": uuid}
            self.layout += 1
        state = self._gpus.get(ident)
        if state is None:
            state = self._gpus[ident] = _Gpu(label)
        if state.name != name:
            state.name = name
            state.spec = spec = self._lookup(name) if isinstance(name, str) else None
            state.spec_peak = spec.bf16_dense_flops if spec is not None else None
        # the row's finite numbers, each read once (`num`: a float's own test first, the
        # sampler's usual value; a bool, a string or an integer past a float's range is not one)
        numeric = _NUMERIC
        nums = {
            k: v if type(v) is float and v - v == 0.0 else num(v)
            for k, v in row.items()
            if k in numeric
        }
        get = nums.get
        ofu = None
        tensor, clock = get("tensor_active"), get("sm_clock_mhz")
        if tensor is not None and clock is not None:
            spec = state.spec
            tensor_clock = spec.tensor_clock_mhz if spec is not None else None
            max_clock = get("max_sm_clock_mhz")
            got = formulas.ofu(tensor, clock, tensor_clock, max_clock)
            if got is not None:
                value, comparable = got
                ofu = value
                state.ofu.update(value)
                state.comparable = state.comparable and comparable
                ref = tensor_clock if comparable else max_clock
                state.latest_ofu_inputs = (tensor, clock, ref, comparable)  # type: ignore[assignment]
                window = get("window_s")
                if window is not None and window > 0:
                    state.ofu_seconds += value * window
                    state.samples_counted += 1
        dram = get("dram_active")
        if dram is not None:
            state.dram.update(dram)
        state.latest = (row, nums, ofu)
        reasons = row.get("throttle")
        if isinstance(reasons, list):
            self.throttle[label] = ([str(r) for r in reasons], t)
        peak = get("measured_peak_flops")
        if peak is not None:
            source = row.get("measured_peak_source")
            entry = (peak, source if isinstance(source, str) else None)
            if entry != self.measured_peaks.get(ident) or not peak:  # 0.0 and -0.0
                self.measured_peaks[ident] = entry
                self.layout += 1
        self.energy.read(ident, label, row.get("energy_j"))

    def tensor_clocks(self) -> dict[str, float | None]:
        """GPU label -> the tensor clock its card's dense peak is stated at (None: the spec
        table has no such clock, or no spec), from the spec each GPU's row looked up once."""
        return {
            g.label: g.spec.tensor_clock_mhz if g.spec is not None else None
            for g in self._gpus.values()
        }

    def _every(self) -> list[_Gpu]:
        """Every sampled GPU by label, sorted again only when one was added (a GPU, once
        sampled, stays): a replay's samples read it 2,000 times."""
        every = self._every_memo
        if len(every) != len(self._gpus):
            every = sorted(self._gpus.values(), key=lambda g: formulas.by_gpu((g.label, 0)))
            self._every_memo = every
        return every

    def _covered(self, covered: list[Any] | None) -> list[_Gpu]:
        """The sampled GPUs among `covered` (None: every one) by label, sorted again only when
        a GPU was added or `covered` changed."""
        if covered is None:
            return self._every()
        key = (tuple(covered), len(self._gpus))
        memo = self._covered_memo
        if memo is not None and memo[0] == key:
            return memo[1]
        idents = [i for i in covered if i in self._gpus]
        gpus = sorted((self._gpus[i] for i in idents), key=lambda g: formulas.by_gpu((g.label, 0)))
        self._covered_memo = (key, gpus)
        return gpus

    def section(
        self,
        covered: list[Any] | None,
        *,
        mfu: dict[str, Any] | None,
        mfu_reason: str | None,
        peak: dict[str, Any] | None,
        peak_reason: str | None,
        detail: bool = True,
        keys: frozenset[str] | None = None,
    ) -> Section:
        """ladder, gpus, ofu, flops_observed, mfu_ofu_gap, arithmetic_intensity (`detail`
        False: their explanations left out, for `Engine.sample`; `keys`: the sample's readers'
        keys, None for all: flops_observed, mfu_ofu_gap and arithmetic_intensity, which
        nothing else here reads, are worked out only when one of them is wanted)."""
        out = Section()
        gpus = self._covered(covered)
        mfu = mfu or {}
        self._ladder(out, gpus, mfu.get("value"))
        rest = keys is None or not keys.isdisjoint(_DERIVED)
        self._ofu(out, gpus, mfu, detail, rest)
        if rest:
            self._intensity(out, gpus, mfu, mfu_reason, peak, peak_reason, detail)
        return out

    def _ladder(self, out: Section, gpus: list[_Gpu], mfu: float | None) -> None:
        if self.unavailable is not None:
            out.absent["ladder"] = f"no GPU counters: {self.unavailable}"
            return
        if not self._gpus:
            out.absent["ladder"] = "no GPU sample yet (tm samples NVML once a second)"
            return
        # plain loops, no comprehension: each is a call of its own (a replay asks 2,000 times)
        top = {} if mfu is None else {"mfu": mfu}
        every = self._every()
        per_gpu: dict[str, dict[str, float]] = {}
        rows: dict[str, dict[str, Any]] = {}
        got: dict[str, list[float]] = {}  # rung -> the covered GPUs' values, in their order
        covers: list[str] = []
        if gpus is every:  # every GPU covered (the common case)
            for g in every:
                rungs = g.rungs
                per_gpu[g.label] = {**rungs, **top}
                rows[g.label] = dict(g.row)
        else:
            labels = {g.label for g in gpus}
            for g in every:
                per_gpu[g.label] = {**g.rungs, **(top if g.label in labels else {})}
                rows[g.label] = dict(g.row)
        for g in gpus:
            covers.append(g.label)
            for rung, value in g.rungs.items():
                got.setdefault(rung, []).append(value)
        mean: dict[str, float] = {}
        for rung in LADDER:
            values = got.get(rung)
            if values:
                mean[rung] = sum(values) / len(values)
        out.values["ladder"] = {
            "gpus": per_gpu, "mean": {**mean, **top}, "mfu": mfu, "covers": covers,
        }
        out.values["gpus"] = rows

    def _ofu(
        self, out: Section, gpus: list[_Gpu], mfu: dict[str, Any], detail: bool,
        rest: bool = True,
    ) -> None:
        """ofu; and with `rest`, flops_observed and mfu_ofu_gap (which follow from it)."""
        # one loop, no comprehension (each is a call of its own; a replay asks 2,000 times);
        # the sums from 0 in the GPUs' order, as `sum` adds
        counted: list[_Gpu] = []
        labels: list[str] = []
        total: float = 0
        comparable = True
        unknown: _Gpu | None = None  # the first GPU counted without a datasheet peak
        for g in gpus:
            ofu = g.ofu.value
            if ofu is not None:
                counted.append(g)
                labels.append(g.label)
                total = total + ofu
                if not g.comparable:
                    comparable = False
                if unknown is None and g.spec_peak is None:
                    unknown = g
        if not counted:
            why = (
                self.unavailable
                or self.gpm_unavailable
                or "no tensor-activity sample yet (GPM needs a Hopper or newer GPU)"
            )
            out.absent.update(ofu=why, flops_observed=why, mfu_ofu_gap=why)
            return
        value = total / len(counted)
        entry: dict[str, Any] = {
            "value": value, "convention": "counters", "source": "measured",
            "comparable_with_mfu": comparable, "gpus": labels,
        }
        if not comparable:
            entry["note"] = (
                "scaled to the max SM clock: the spec states no tensor clock for the dense "
                "peak, so OFU is not compared with MFU"
            )
        out.values["ofu"] = entry
        if detail:
            out.explain["ofu"] = _explain_ofu(counted, value)
        if not rest:
            return
        if unknown is not None:
            out.absent["flops_observed"] = (
                f"{unknown.name or 'a GPU'} has no datasheet dense peak in the table"
            )
        else:
            observed: float = 0
            for g in counted:
                observed = observed + g.spec_peak * g.ofu_seconds  # type: ignore[operator]
            out.values["flops_observed"] = {
                "value": observed, "convention": "counters", "gpus": labels,
                "note": "approximate: counts recompute and padding too",
            }
            if detail:
                out.explain["flops_observed"] = _explain_observed(counted, observed)
        mfu_value = mfu.get("value")
        if mfu_value is None:
            out.absent["mfu_ofu_gap"] = "needs MFU under a chosen convention"
        elif not comparable:
            out.absent["mfu_ofu_gap"] = "OFU is not comparable: no tensor clock in the spec"
        else:
            out.values["mfu_ofu_gap"] = {
                "value": value - mfu_value, "ofu": "counters", "mfu": mfu.get("convention"),
            }

    def _intensity(
        self,
        out: Section,
        gpus: list[_Gpu],
        mfu: dict[str, Any],
        mfu_reason: str | None,
        peak: dict[str, Any] | None,
        peak_reason: str | None,
        detail: bool,
    ) -> None:
        """FLOP per DRAM byte over the window; the first unmet need is the absent reason."""
        dram_sum: float = 0
        n_dram = 0
        for g in gpus:
            active = g.dram.value
            if active is not None:
                dram_sum = dram_sum + active
                n_dram += 1
        dram = dram_sum / n_dram if n_dram else None
        mfu_value = mfu.get("value")
        hbm = (peak or {}).get("hbm_bytes_per_s")
        # the first unmet need is the reason, worded only once found (a sample asks each time)
        why: str | None = None
        if peak is None:
            why = f"no dense peak: {peak_reason}"
        elif not hbm:
            why = "needs the card's memory bandwidth in the spec table"
        elif mfu_value is None:
            why = f"needs MFU under a chosen convention: {mfu_reason or 'none chosen'}"
        elif dram is None:
            why = self.unavailable or self.gpm_unavailable or "needs a DRAM-activity sample"
        elif dram <= 0:
            why = "the DRAM was idle over the window"
        if why is not None:
            out.absent["arithmetic_intensity"] = why
            return
        peak_flops = peak["bf16_dense_flops"]  # type: ignore[index]
        value = formulas.arithmetic_intensity(peak_flops / hbm, mfu_value, dram)  # type: ignore[arg-type, operator]
        out.values["arithmetic_intensity"] = {
            "value": value, "unit": "FLOP/byte", "convention": mfu.get("convention"),
            "note": "aggregate over the sampling window, not per kernel",
        }
        if not detail:
            return
        labels = ", ".join(g.label for g in gpus)
        out.explain["arithmetic_intensity"] = explain.explanation(
            value, "FLOP/byte", "peak_flops * mfu / (hbm_bytes_per_s * dram_active)",
            [
                explain.given("peak_flops", peak_flops, "FLOP/s per GPU",
                              f"{peak['label']}: dense BF16 peak of {peak['name']}"),  # type: ignore[index]
                explain.given("mfu", mfu_value, "fraction", "see mfu"),
                explain.given("hbm_bytes_per_s", hbm, "byte/s per GPU",
                              f"datasheet memory bandwidth of {peak['name']}"),  # type: ignore[index]
                explain.given("dram_active", dram, "fraction",
                              f"measured: mean over GPUs {labels} of each GPU's moving average "
                              "of DRAM active (NVML GPM)"),
            ],
            convention=mfu.get("convention"),
            note="model FLOPs done per byte moved to or from DRAM, over the sampling window",
        )


def _name(prefix: str, gpu: _Gpu, i: int) -> str:
    return f"{prefix}_gpu{gpu.label if gpu.label.isdigit() else i}"


def _explain_ofu(gpus: list[_Gpu], value: float) -> dict[str, Any]:
    names = [_name("ofu", g, i) for i, g in enumerate(gpus)]
    formula = f"({' + '.join(names)}) / {len(gpus)}" if len(gpus) > 1 else names[0]
    inputs = []
    for name, g in zip(names, gpus, strict=True):
        latest = ""
        if g.latest_ofu_inputs is not None:
            tensor, clock, ref, comparable = g.latest_ofu_inputs
            ref_name = "tensor clock of the dense peak" if comparable else "max SM clock"
            latest = (
                f"; latest sample: tensor_active {tensor:g} x min(SM clock {clock:g} MHz, "
                f"{ref_name} {ref:g} MHz) / {ref:g} MHz"
            )
        inputs.append(explain.given(
            name, g.ofu.value, "fraction",
            f"measured on GPU {g.label} ({g.name}): moving average of tensor_active x "
            f"min(SM clock, reference clock) / reference clock over its samples{latest}",
        ))
    return explain.explanation(
        value, "fraction", formula, inputs, convention="counters",
        note="observed FLOPs utilization from the tensor cores' activity (NVML GPM), over the "
        "GPUs the training uses (the ones MFU divides by)",
    )


def _explain_observed(gpus: list[_Gpu], value: float) -> dict[str, Any]:
    terms, inputs = [], []
    for i, g in enumerate(gpus):
        peak, seconds = _name("peak_flops", g, i), _name("ofu_seconds", g, i)
        terms.append(f"{peak} * {seconds}")
        inputs.append(explain.given(peak, g.spec_peak, "FLOP/s",
                                    f"datasheet dense BF16 peak of {g.name}"))
        inputs.append(explain.given(
            seconds, g.ofu_seconds, "s",
            f"measured on GPU {g.label}: sum over {g.samples_counted} samples of OFU x the "
            "sample's window",
        ))
    return explain.explanation(
        value, "FLOP", " + ".join(terms), inputs, convention="counters",
        note="approximate: the tensor cores' activity counts recompute and padding too",
    )
