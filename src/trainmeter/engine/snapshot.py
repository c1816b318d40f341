"""The engine: records in, snapshots out. A pure function of the records it is fed.

It holds no clock and does no I/O, so a live run and a replay of `events.jsonl` give the same
numbers (`now` is passed in, and only moves the elapsed time and the stuck-run check of a run
still going). Every number that cannot be computed is left out and named in `absent` with the
reason and what would enable it, never a zero.

`feed` does the incremental work and is cheap (replay pushes every line of a long log through
it); `snapshot` composes the parts and costs the same however many records came before.
"""

from __future__ import annotations

from typing import Any

from ..hardware import specs
from . import alerts, budget, peak
from .counters import GpuCounters
from .facts import FactStore, rank
from .flops import CONVENTIONS, ModelShape, all_conventions, flops_per_token, formulas
from .formulas import mfu as mfu_of
from .formulas import num
from .host_node import HostSeries, NodeSeries
from .ranks import RankModel, RankTimes, SeriesOwners
from .series import SeriesStore
from .throughput import StepClock
from .timesplit import TimeLedger

SHAPE_KEYS = ("n_params", "n_embedding_params", "n_layers", "d_model", "seq_len")
_SHAPE_FLAGS = {
    "n_params": "--params",
    "n_embedding_params": "--embedding-params",
    "n_layers": "--layers",
    "d_model": "--d-model",
    "seq_len": "--seq-len",
}
_RUN_FIELDS = ("name", "argv", "tm_version", "hostname", "unix_time", "python")


class Engine:
    """`feed(record)` any record dict (unknown kinds ignored); `snapshot(now=None)` a dict."""

    def __init__(self, lookup: Any = None) -> None:
        self._lookup = lookup or specs.lookup
        self.facts = FactStore()
        self.clock = StepClock()
        self.ranks = RankTimes()
        self.rank_model = RankModel()  # the node's ranks and its step clock (docs/ranks.md)
        self.owners = SeriesOwners()  # which rank each series is taken from
        self.ledger = TimeLedger()
        self.series = SeriesStore()
        self.gpu = GpuCounters(self._lookup)
        self.host = HostSeries()
        self.node = NodeSeries()
        self.data_window = alerts.DataWindow()
        self.devices: dict[tuple[Any, Any], dict[str, Any]] = {}
        self.world_size = 1
        self.probes: set[str] = set()
        self.hello: dict[str, Any] = {}
        self.run: dict[str, Any] = {}
        self.t_last = 0.0
        self.records = 0
        self.ignored = 0
        self._handlers = {
            "step": self._on_step,
            "metric": self._on_metric,
            "phase": self._on_phase,
            "fact": self._on_fact,
            "hello": self._on_hello,
            "run.start": self._on_start,
            "run.end": self._on_end,
            "sample.gpu": self._on_gpu,
            "sample.host": self._on_host,
            "sample.node": self._on_node,
        }

    # ---- input -------------------------------------------------------------------------

    def feed(self, record: dict[str, Any]) -> None:
        """Take one record. Never raises: a record it cannot use is counted in `ignored`."""
        self.records += 1
        try:
            t = record["t"]
            if not isinstance(t, (int, float)) or isinstance(t, bool) or t != t:
                self.ignored += 1
                return
            if t > self.t_last:
                self.t_last = t
            handler = self._handlers.get(record["kind"])
            if handler is not None:
                d = record["d"]
                handler(record, d if isinstance(d, dict) else {}, t)
        except Exception:  # noqa: BLE001 - a malformed record must not stop a replay
            self.ignored += 1

    def _on_step(self, record: dict[str, Any], d: dict[str, Any], t: float) -> None:
        r = record.get("rank") or 0
        k = d.get("k")
        self.ranks.step(r, t, k if isinstance(k, int) and k > 0 else 1)
        if not self.rank_model.is_clock(r):
            return  # the node's local rank 0 is its step clock
        clock = self.clock
        self.ledger.step(t)
        clock.step(t, d)
        self.data_window.step(t, self.ledger.phase_s.get("data", 0.0))
        if self.owners.holding:
            self._add_series(self.owners.settle(t, clock.records))

    def _on_metric(self, record: dict[str, Any], d: dict[str, Any], t: float) -> None:
        key, value = d.get("key"), num(d.get("value"))
        if not isinstance(key, str) or value is None:
            return
        via = d.get("via")
        emitted = via == "emit" if via else record.get("src") == "emit"
        step = d.get("step")
        x = step if isinstance(step, int) and not isinstance(step, bool) else self.clock.steps
        item = (key, value, via if isinstance(via, str) else None, emitted, step, x)
        # one copy of each curve: the clock rank's, else the rank that logs it (ranks.py)
        rank, clock = record.get("rank") or 0, self.rank_model.clock_rank
        self._add_series(self.owners.offer(key, rank, clock, t, self.clock.records, item))

    def _add_series(self, items: list[tuple[Any, ...]]) -> None:
        for item in items:
            self.series.add(*item)

    def _on_phase(self, record: dict[str, Any], d: dict[str, Any], t: float) -> None:
        if not self.rank_model.is_clock(record.get("rank")):
            return
        name, seconds = d.get("name"), num(d.get("s"))
        if isinstance(name, str) and seconds is not None and seconds >= 0:
            n = d.get("n")
            self.ledger.phase(name, seconds, n if isinstance(n, int) and n > 0 else 1, t)

    def _on_fact(self, record: dict[str, Any], d: dict[str, Any], t: float) -> None:
        key = d.get("key")
        if key == "device":
            dev = d.get("value")
            if isinstance(dev, dict):
                ident = (record.get("rank") or 0, dev.get("uuid") or dev.get("index"))
                self.devices[ident] = dev
        elif isinstance(key, str):
            self.facts.offer(key, d.get("value"), d.get("source"), d.get("note"))
            if key in ("dp", "tokens_per_step"):
                self._refresh_clock()

    def _refresh_clock(self) -> None:
        """Tokens per record scale by the data-parallel degree; a declared per-step count wins."""
        dp = self.facts.number("dp")
        job_dp = int(dp) if dp is not None and dp >= 1 else self.world_size
        # this node's data-parallel ranks: the job's times the node's share of the ranks
        self.clock.dp = max(round(job_dp * self.rank_model.node_share()), 1)
        fact = self.facts.get("tokens_per_step")
        value = self.facts.number("tokens_per_step")
        declared = fact is not None and fact.source in ("declared", "emitted") and value
        self.clock.declared_per_step = value if declared else None

    def _on_hello(self, record: dict[str, Any], d: dict[str, Any], t: float) -> None:
        self.rank_model.hello(record.get("rank"), d)
        ws = d.get("world_size")
        if isinstance(ws, int) and ws > self.world_size:
            self.world_size = ws
        self._refresh_clock()
        if self.rank_model.is_clock(record.get("rank")):
            probes = d.get("probes")
            if isinstance(probes, list):
                self.probes.update(p for p in probes if isinstance(p, str))
            self.hello = {**self.hello, **d, "probes": sorted(self.probes)}

    def _on_start(self, record: dict[str, Any], d: dict[str, Any], t: float) -> None:
        self.ledger.t_start = t
        self.ledger.node_uptime_s = num(d.get("node_uptime_s"))
        self.run.update({k: d[k] for k in _RUN_FIELDS if k in d})
        self.rank_model.start(d)
        declared = d.get("declared")
        if isinstance(declared, dict):
            notes = d.get("declared_notes")
            notes = dict(notes) if isinstance(notes, dict) else {}
            if "peak_source" in declared:  # older logs kept the peak's source among the facts
                notes.setdefault("peak_flops", declared["peak_source"])
            for key, value in declared.items():
                if key != "peak_source":
                    self.facts.offer(key, value, "declared", notes.get(key))
            self._refresh_clock()

    def _on_end(self, record: dict[str, Any], d: dict[str, Any], t: float) -> None:
        self.ledger.t_end = t
        for key in ("exit_status", "signal", "elapsed_s"):
            if key in d:
                self.run[key] = d[key]

    def _on_gpu(self, record: dict[str, Any], d: dict[str, Any], t: float) -> None:
        self.gpu.sample(t, d)

    def _on_host(self, record: dict[str, Any], d: dict[str, Any], t: float) -> None:
        self.host.sample(t, d)

    def _on_node(self, record: dict[str, Any], d: dict[str, Any], t: float) -> None:
        self.node.sample(t, d)

    # ---- derived facts -----------------------------------------------------------------

    def shape(self) -> ModelShape | None:
        values = [self.facts.number(k) for k in SHAPE_KEYS]
        if any(v is None for v in values):
            return None
        return ModelShape(*(int(v) for v in values))  # type: ignore[arg-type]

    def _flops_per_token(
        self, absent: dict[str, str], warnings: list[str]
    ) -> dict[str, Any] | None:
        """FLOPs per token: declared, else from the model shape under the chosen convention,
        else the range over every convention (never a guess of one)."""
        conv = self.facts.get("convention")
        conv_name = conv.value if conv is not None else None
        if conv_name is not None and conv_name not in CONVENTIONS:
            warnings.append(
                f"convention {conv_name!r} is not one of {', '.join(CONVENTIONS)}: the range "
                "over all conventions is shown"
            )
        declared = self.facts.get("flops_per_token")
        value = self.facts.number("flops_per_token")
        if declared is not None and value is not None and value > 0:
            return {
                "value": value,
                "convention": conv_name if isinstance(conv_name, str) else "declared value",
                "source": declared.source,
            }
        missing = [k for k in SHAPE_KEYS if self.facts.number(k) is None]
        shape = self.shape()
        if shape is None:
            flags = ", ".join(_SHAPE_FLAGS[k] for k in missing)
            absent["flops_per_token"] = (
                f"the model shape is incomplete (missing {', '.join(missing)}): declare {flags}, "
                "or --flops-per-token"
            )
            return None
        source = max((self.facts.get(k).source for k in SHAPE_KEYS), key=rank)  # type: ignore[union-attr]
        if conv_name in CONVENTIONS:
            return {
                "value": flops_per_token(shape, conv_name),
                "convention": conv_name,
                "formula": CONVENTIONS[conv_name][0],
                "source": source,
            }
        spread = sorted(all_conventions(shape).values())
        return dict(
            value=None, convention="not chosen", source=source, range=[spread[0], spread[-1]]
        )

    def _device_names(self) -> tuple[list[str], str]:
        """Names of the GPUs the training process reported, else those the sampler watched."""
        if self.devices:
            return [str(d.get("name")) for d in self.devices.values() if d.get("name")], "detected"
        names = [str(d.get("name")) for d in self.gpu.devices.values() if d.get("name")]
        by = self.gpu.selected_by
        source = "detected" if by == "process" else "declared" if by == "flag" else "assumed"
        return names, source

    def _visible(self) -> dict[Any, dict[str, Any]]:
        return self.devices or self.gpu.devices

    # ---- output ------------------------------------------------------------------------

    def position(self) -> dict[str, Any]:
        """Where the run is now: the x values of every chart. Cheap: no snapshot is built."""
        fpt = self._flops_per_token({}, [])
        value = fpt["value"] if fpt else None
        seen = self.clock.tokens_seen
        return {
            "step": self.clock.steps,
            "tokens": seen,
            "flops": None if value is None else value * seen,
        }

    def curves(self) -> dict[str, dict[str, Any]]:
        """The loop's series with a bounded history each, for loss curves."""
        return self.series.curves()

    def snapshot(self, now: float | None = None) -> dict[str, Any]:
        absent: dict[str, str] = {}
        warnings: list[str] = []
        clock = self.clock
        snap: dict[str, Any] = {"steps": clock.steps, "tokens_seen": clock.tokens_seen}
        if clock.last_n is not None:
            snap["step_index"] = clock.last_n
        tps = clock.tokens_per_s.value
        if tps:
            snap["tokens_per_s"] = tps
            snap["tokens_counted"] = (
                "declared"
                if clock.declared_per_step is not None
                else "real (padding excluded)"
                if clock.has_real
                else "all (padding included)"
            )
        elif clock.records and not clock.has_tokens and clock.declared_per_step is None:
            absent["tokens_per_s"] = (
                "the agent could not count tokens in the batches: declare --tokens-per-step or "
                "emit(tokens_per_step=...)"
            )
        else:
            absent["tokens_per_s"] = "needs a few step reports past warm-up"
        clock_rank = self.rank_model.clock_rank
        step_time = self.ranks.step_time(clock_rank)
        if step_time:
            snap["step_time_s"] = step_time
        else:
            absent["step_time_s"] = f"needs two step reports from rank {clock_rank}"
        padding = clock.padding()
        if padding is not None:
            snap["padding"] = padding
        ranks = self.ranks.snapshot()
        if ranks is not None:
            snap["ranks"] = ranks
        elif self.world_size > 1:
            absent["ranks"] = "needs step reports from two ranks or more"

        fpt = self._flops_per_token(absent, warnings)
        fpt_value = fpt["value"] if fpt else None
        names, devices_source = self._device_names()
        measured = list(self.gpu.measured_peaks.values())
        peak_entry, spec, peak_reason = peak.choose(self.facts, names, measured, self._lookup)
        n_gpus = len(self._visible()) or None
        if fpt is None:
            absent["flops_spent"] = "needs FLOPs per token: " + absent["flops_per_token"]
        elif fpt_value is None:
            snap["flops_per_token"] = fpt
            absent["flops_spent"] = "no convention chosen: declare --convention " + "|".join(
                CONVENTIONS
            )
        else:
            snap["flops_per_token"] = fpt
            snap["flops_spent"] = fpt_value * clock.tokens_seen
        snap.update(
            budget.budget(
                self.facts,
                steps=clock.steps,
                tokens_seen=clock.tokens_seen,
                tokens_per_step=clock.counted_per_step,
                tokens_per_s=tps,
                step_time_s=step_time,
                flops_per_token=fpt_value,
                absent=absent,
            )
        )
        shape = self.shape()
        self._mfu(snap, fpt, tps, peak_entry, peak_reason, n_gpus, shape, absent)
        self.gpu.snapshot(snap, peak_entry, absent)
        energy = self.gpu.energy.snapshot(clock.tokens_seen)
        if energy is not None:
            snap["energy"] = energy
        else:
            absent["energy"] = self.gpu.unavailable or "no GPU energy counter reading yet"
        if peak_entry is not None:
            snap["peak"] = peak_entry
        else:
            absent["peak"] = peak_reason or "no GPU"
        if self._visible():
            snap["devices"] = [
                {"name": d.get("name"), "index": d.get("index"), "uuid": d.get("uuid")}
                for d in self._visible().values()
            ]
        if n_gpus is None:
            absent["n_gpus"] = (
                "no device fact from the agent and no GPU sample (NVML): see tm doctor, "
                "or give --gpus"
            )
        else:
            snap["n_gpus"] = {"value": n_gpus, "source": devices_source}
            if devices_source == "assumed":
                warnings.append(
                    "the training process did not report its GPUs, so the GPU count and model "
                    "are the visible devices"
                )
        if self.gpu.versions:
            snap["gpu_versions"] = self.gpu.versions
        if shape is not None:
            snap["conventions"] = all_conventions(shape)
        snap["convention_formulas"] = formulas()
        if self.host.latest:
            snap["host"] = dict(self.host.latest)
        else:
            absent["host"] = "no process-tree sample yet"
        if self.node.latest:
            snap["node"] = dict(self.node.latest)
        else:
            absent["node"] = "no node sample yet"
        if self.owners.holding:
            final = now is None or self.ledger.t_end is not None
            self._add_series(self.owners.settle(now or self.t_last, self.clock.records, final))
        snap["series"] = self.series.snapshot()
        time_split = self.ledger.snapshot(self.t_last, now, self.probes, absent)
        if time_split is not None:
            snap["time"] = time_split
        self._counted(snap, peak_entry, n_gpus, tps, shape, absent)
        plan = budget.plan(
            self.facts,
            snap,
            (peak_entry or {}).get("bf16_dense_flops"),
            n_gpus,
            fpt_value,
            absent,
        )
        if plan is not None:
            snap["plan"] = plan
        self._warnings(warnings)
        snap["alerts"] = self._alerts(snap, now)
        snap["facts"] = self.facts.snapshot()
        if self.run:
            snap["run"] = dict(self.run)
        snap["job"] = self.rank_model.snapshot()
        if self.hello:
            snap["agent"] = {
                k: self.hello[k]
                for k in ("world_size", "probes", "python", "versions")
                if k in self.hello
            }
        snap["records"] = {"fed": self.records, "ignored": self.ignored}
        snap["warnings"] = warnings
        snap["absent"] = absent
        return snap

    def _mfu(
        self,
        snap: dict[str, Any],
        fpt: dict[str, Any] | None,
        tps: float | None,
        peak_entry: dict[str, Any] | None,
        peak_reason: str | None,
        n_gpus: int | None,
        shape: ModelShape | None,
        absent: dict[str, str],
    ) -> None:
        if fpt is None:
            absent["mfu"] = "needs FLOPs per token: " + absent["flops_per_token"]
            return
        if not tps:
            absent["mfu"] = "needs tokens/s: " + absent.get("tokens_per_s", "not measured yet")
            return
        if peak_entry is None:
            absent["mfu"] = f"no dense peak to divide by: {peak_reason}"
            return
        if not n_gpus:
            absent["mfu"] = "the GPU count is unknown"
            return
        peak_flops = peak_entry["bf16_dense_flops"]

        def util(per_token: float) -> float:
            return mfu_of(per_token, tps, n_gpus, peak_flops)  # type: ignore[arg-type]

        entry = dict(
            convention=fpt["convention"], n_gpus=n_gpus, peak=peak_entry["name"],
            peak_label=peak_entry["label"], peak_source=peak_entry["source"],
        )  # fmt: skip
        if fpt["value"] is None:
            entry["range"] = [util(fpt["range"][0]), util(fpt["range"][1])]
        else:
            entry["value"] = util(fpt["value"])
        if shape is not None:
            entry["by_convention"] = {k: util(v) for k, v in all_conventions(shape).items()}
        snap["mfu"] = entry

    def _counted(
        self,
        snap: dict[str, Any],
        peak_entry: dict[str, Any] | None,
        n_gpus: int | None,
        tps: float | None,
        shape: ModelShape | None,
        absent: dict[str, str],
    ) -> None:
        """The `counted` convention: executed FLOPs, shown beside MFU and never in its place."""
        per_token = self.facts.number("counted_flops_per_token")
        if per_token is None:
            absent["counted"] = (
                "no step was counted (the agent's flops probe did not attach, or FlopCounterMode "
                "saw no operator it knows)"
            )
            return
        source = self.facts.get("counted_flops_per_token").source  # type: ignore[union-attr]
        counted = dict(
            convention="counted", per_token=per_token, source=source,
            flops_spent=per_token * self.clock.tokens_seen,
            note="FLOPs the operators executed (recompute included): not model FLOPs",
        )  # fmt: skip
        if tps and n_gpus and peak_entry is not None:
            counted["utilization"] = mfu_of(per_token, tps, n_gpus, peak_entry["bf16_dense_flops"])
        if shape is not None:
            ratios = {k: per_token / v for k, v in all_conventions(shape).items() if v}
            counted["against_conventions"] = ratios
        snap["counted"] = counted

    def _warnings(self, warnings: list[str]) -> None:
        facts = self.facts
        experts = facts.value("moe_experts")
        if experts is not None:
            warnings.append(
                f"mixture of experts ({experts} experts in the config): only the active "
                "parameters do work per token, so a FLOPs count from all parameters is too high; "
                "give the active count with --params"
            )
        declared = self.clock.declared_per_step
        detected = [
            v for v in (self.clock.detected_per_step, self.clock.detected_real_per_step) if v
        ]
        if (
            declared is not None
            and detected
            and all(abs(declared / v - 1.0) > 0.01 for v in detected)
        ):
            warnings.append(
                f"tokens per step: {declared:g} declared, {detected[0]:g} detected in the "
                "batches (more than 1% apart); counting the declared value"
            )
        reason = facts.value("observe_only")
        if reason is not None:
            warnings.append(
                f"observe only ({reason}): no agent runs inside the program, so there are no "
                "steps, tokens, loss or MFU; GPU and host counters only"
            )
        for key in ("agent_dropped_records", "ingest_dropped"):
            lost = facts.number(key)
            if lost:
                warnings.append(f"{lost:g} records were dropped ({key}): counts may be low")
        for key in facts.keys():
            if key == "tokens_per_step":
                continue
            best = facts.get(key)
            for other in facts.conflicts(key):
                warnings.append(
                    f"{key}: {other.source} {other.value!r} disagrees with {best.source} "  # type: ignore[union-attr]
                    f"{best.value!r}; the {best.source} value is used"  # type: ignore[union-attr]
                )
        if self.ignored:
            warnings.append(f"{self.ignored} records could not be used and were skipped")

    def _alerts(self, snap: dict[str, Any], now: float | None) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []

        def add(alert: dict[str, Any] | None) -> None:
            if alert is not None:
                out.append(alert)

        if "dataloader" in self.probes:
            add(alerts.data_starvation(self.data_window))
        out.extend(alerts.throttling(self.gpu.throttle))
        add(alerts.straggler(snap.get("ranks"), self.clock.last_t))
        disk = (self.node.latest.get("disk") or {}).get("path")
        add(alerts.disk_filling(self.node.disk_trend, disk))
        add(
            alerts.stuck(
                now,
                self.ledger.t_end is not None,
                self.clock.last_t,
                self.clock.record_interval.value,
            )
        )
        ofu = (snap.get("ofu") or {}).get("value")
        add(
            alerts.mfu_impossible(
                snap.get("mfu") or {}, ofu, self.gpu.comparable, self.clock.last_t
            )
        )
        return out
