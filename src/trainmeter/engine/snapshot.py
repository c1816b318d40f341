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

from .. import payloads
from . import (
    advice,
    alerts,
    budget,
    cost,
    counted,
    devices,
    mfu,
    model_flops,
    models,
    notices,
    samples,
    throughput,
    waterfall,
)
from .cards import Cards
from .counters import GpuCounters
from .death import DeathRecords
from .facts import FactStore
from .finite import finite_only
from .flops import ModelShape
from .formulas import num
from .host_node import HostSeries, NodeSeries
from .memory import MemoryState
from .model_flops import SHAPE_KEYS
from .ranks import RankModel, RankTimes
from .section import Section
from .series import SeriesStore
from .stragglers import Stragglers
from .throughput import StepClock
from .timesplit import TimeLedger

__all__ = ["Engine", "SHAPE_KEYS"]
_RUN_FIELDS = ("name", "argv", "tm_version", "hostname", "unix_time", "python")
#: The keys the budget's part gives a snapshot (`budget.section`).
_BUDGET_KEYS = frozenset(("progress", "eta_s"))
_STEP, _METRIC, _PHASE = payloads.STEP.name, payloads.METRIC.name, payloads.PHASE.name
#: The typed record classes of a step, a metric and a phase (`runlog/typed.py`), learned from
#: the first record of each `Engine.feed_many` sees (`_typed_other`): the engine does not
#: import the decoder's types.
_CLASSES: list[Any] = [None, None, None]
#: and the samplers' reading classes, each with its kind (their `d` is the handler's dict)
_SAMPLER_KINDS: dict[type, str] = {}
_SAMPLERS = frozenset((payloads.SAMPLE_GPU.name, payloads.SAMPLE_HOST.name, payloads.SAMPLE_NODE.name))
#: The part a sample leaves out (the budget, energy: `sample`'s `keys`), one for every sample:
#: read, never changed
_NOTHING = Section()


def _spec_lookup(name: str) -> Any:
    """`hardware.specs.lookup`, imported on the first GPU name: a run without GPUs (and the
    start of every run) does not pay for reading the spec table."""
    from ..hardware import specs

    return specs.lookup(name)


class Engine:
    """`feed(record)` any record dict (unknown kinds ignored); `snapshot(now=None)` a dict."""

    def __init__(self, lookup: Any = None) -> None:
        self.lookup = lookup or _spec_lookup
        self.cards = Cards(self.lookup)  # each card's spec looked up once, for every part
        self.facts = FactStore()
        self.clock = StepClock()
        self.ranks = RankTimes(self.clock)  # the clock rank's window is the clock's
        self.stragglers = Stragglers()  # per-rank compute and wait, the slow rank named
        self.rank_model = RankModel()  # the node's ranks and its step clock (docs/ranks.md)
        self.ledger = TimeLedger()
        self.series = SeriesStore()
        self.gpu = GpuCounters(self.cards.spec)
        self.host = HostSeries()
        self.node = NodeSeries()
        self.memory = MemoryState()
        self.death = DeathRecords()
        self.end: dict[str, Any] = {}  # run.end as recorded (signal_from, oom_kills...)
        self.data_window = alerts.DataWindow()
        self.devices: dict[tuple[Any, Any], dict[str, Any]] = {}
        self.world_size = 1
        self.probes: set[str] = set()
        self.hello: dict[str, Any] = {}
        self.agent_seen = False  # a hello from any rank: an agent runs in the training
        self.run: dict[str, Any] = {}
        self.t_last = 0.0
        self.t0 = 0.0  # the run's start (run.start, else the first record): the points' origin
        self._started = False
        self._points: list[tuple[str, int, float, float, float | None]] | None = None
        self.records = 0
        self.ignored = 0
        self._handlers = {  # by the table of kinds; an alert is logged for people, not read back
            payloads.STEP.name: self._on_step,
            payloads.METRIC.name: self._on_metric,
            payloads.PHASE.name: self._on_phase,
            payloads.COMM.name: self._on_comm,
            payloads.FACT.name: self._on_fact,
            payloads.HELLO.name: self._on_hello,
            payloads.RUN_START.name: self._on_start,
            payloads.RUN_END.name: self._on_end,
            payloads.SAMPLE_GPU.name: self._on_gpu,
            payloads.SAMPLE_HOST.name: self._on_host,
            payloads.SAMPLE_NODE.name: self._on_node,
            payloads.MEMORY.name: self._on_memory,
            payloads.CRASH.name: self.death.crash,
        }

    # ---- input -------------------------------------------------------------------------

    def feed(self, record: dict[str, Any]) -> None:
        """Take one record. Never raises: a record it cannot use is counted in `ignored`.

        Constant, small work per record (a replay feeds every line of a long log): the common
        types are told apart by `type(...) is`, the rare ones by the general checks."""
        if type(record) is not dict and hasattr(record, "d"):  # a typed record (`feed_many`)
            self.feed_many((record,))
            return
        self.records += 1
        try:
            t = record["t"]
            kind_t = type(t)
            if kind_t is float:
                if t != t:
                    self.ignored += 1
                    return
            elif kind_t is not int and (
                not isinstance(t, (int, float)) or isinstance(t, bool) or t != t
            ):
                self.ignored += 1
                return
            if t > self.t_last:
                self.t_last = t
            if not self._started:
                self._started = True
                self.t0 = t
            handler = self._handlers.get(record["kind"])
            if handler is not None:
                d = record["d"]
                handler(record, d if type(d) is dict or isinstance(d, dict) else {}, t)
        except Exception:  # noqa: BLE001 - a malformed record must not stop a replay
            self.ignored += 1

    def feed_many(self, records: list[Any]) -> None:
        """`feed` each record in order: a dict, or a typed record (`runlog/typed.py`, checked).
        Typed steps, metrics and phases are taken in line by `_step`'s, `_metric`'s and
        `_phase`'s rules, what only a dict changes read again after each dict; the clock
        rank's steps and phases are handed to the step clock and the time ledger in one call
        each (`_settle`: each part's records in order, none read by another part between
        them; a dict, a step through `_step` or a class not seen yet settles them first)."""
        feed, step = self.feed, self._step
        handlers, rank_model, ranks = self._handlers, self.rank_model, self.ranks
        add = self.series.add
        t_last, started, dicts = self.t_last, self._started, 0  # (`feed` counts a dict)
        clock_rank, mirrored = rank_model.clock_rank, ranks.clock is not None
        listening = self._points is not None
        # the clock rank's step records; its phases (name, seconds, n, t) and steps (t) in
        # order; the values taken (key, value, step, t, steps gathered before it)
        steps, timeline, points = [], [], []  # type: ignore[var-annotated]
        (step_cls, metric_cls, phase_cls), sampler_kinds = _CLASSES, _SAMPLER_KINDS  # by class
        for record in records:
            cls = type(record)
            if cls is dict:
                self.t_last = t_last
                dicts += 1
                self._settle(steps, timeline, points)
                feed(record)
                t_last, started = self.t_last, self._started
                clock_rank, mirrored = rank_model.clock_rank, ranks.clock is not None
                listening = self._points is not None
                continue
            try:
                t = record.t
                if t > t_last:
                    t_last = t
                if not started:
                    self._started = started = True
                    self.t0 = t
                d = record.d
                if cls is step_cls:  # `_step`, the clock rank's gathered
                    r = record.rank or 0
                    if r != clock_rank or not mirrored:
                        if timeline or points:
                            self._settle(steps, timeline, points)
                        step(r, t, d.k, d.tokens, d.real_tokens, d.n)
                        continue
                    steps.append(record)
                    timeline.append(t)
                elif cls is metric_cls:  # `_metric`: a typed value is an int or a finite float
                    value = d.value  # (typed.py's bounds refuse NaN and the infinities)
                    if type(value) is int:
                        value = float(value)  # (past a float's range: raises, as `_metric`)
                    elif value is None:
                        continue
                    key = d.key
                    if key is None:
                        continue
                    via = d.via
                    step_of = d.step
                    emitted = via == "emit" if via else record.src == "emit"
                    if add(key, value, via, emitted, step_of, record.rank or 0) and listening:
                        points.append((key, value, step_of, t, len(steps)))
                elif cls is phase_cls:  # `_phase`: the seconds an int or a finite float
                    if (record.rank or 0) != clock_rank:
                        continue
                    seconds = d.s
                    if type(seconds) is not float:
                        seconds = num(seconds)
                    name = d.name
                    if name is not None and seconds is not None and seconds >= 0:
                        n = d.n
                        timeline.append((name, seconds, n if type(n) is int and n > 0 else 1, t))
                elif cls in sampler_kinds:  # a sampler's reading: `d` the dict its handler reads
                    handlers[sampler_kinds[cls]](record, d, t)
                else:  # a class not seen yet
                    self._settle(steps, timeline, points)
                    if self._typed_other(record, cls, d, t):
                        step_cls, metric_cls, phase_cls = _CLASSES  # learned
            except Exception:  # noqa: BLE001 - a malformed record must not stop a replay
                self.ignored += 1
        self.t_last, self.records = t_last, self.records + len(records) - dicts
        self._settle(steps, timeline, points)

    def _settle(
        self,
        steps: list[Any],
        timeline: list[Any],
        points: list[tuple[str, float, Any, float, int]],
    ) -> None:
        """Hand what `feed_many` gathered to the parts, and empty the lists: the clock rank's
        phases and steps to the time ledger (the data window's points with them), its steps
        to the step clock, then the points of the values taken between them. Typed records'
        fields are checked and these parts only add and compare them, so nothing here raises
        that one record at a time would have counted as ignored; anything else is counted as
        one ignored."""
        if not timeline and not points:
            return
        try:
            if timeline:
                window = self.data_window
                data_points = window.points
                self.ledger.many(timeline, data_points)
                if len(data_points) >= window.limit:
                    window.trim()
            if points:
                clock = self.clock
                counts = [clock.counts()]
                clock.step_many(steps, counts)
                self._points_many(points, counts)
            elif steps:
                self.clock.step_many(steps)
        except Exception:  # noqa: BLE001 - a malformed record must not stop a replay
            self.ignored += 1
        steps.clear()
        timeline.clear()
        points.clear()

    def _points_many(
        self,
        points: list[tuple[str, float, Any, float, int]],
        counts: list[tuple[int, float | None]],
    ) -> None:
        """`_point` for each (key, value, step, t, i) in order, the clock's counts those after
        its first i steps of the block (`counts[i]`, `StepClock.step_many`)."""
        t0 = self.t0
        append = self._points.append  # type: ignore[union-attr]
        for key, value, step, t, i in points:
            steps, tokens = counts[i]
            if type(step) is int or isinstance(step, int) and not isinstance(step, bool):
                x = step
            else:
                x = steps
            if tokens is not None and x != steps and steps > 0:
                tokens = tokens * x / steps  # the loop logged a step the count has passed
            append((key, x, value, t - t0 if t > t0 else 0.0, tokens))

    def _typed_other(self, record: Any, cls: type, d: Any, t: float) -> bool:
        """A typed record `feed_many` does not know by its class: a sampler's reading goes to
        its handler (False; its class and kind are learned); the first step, metric or phase record of a class goes through
        `_step`, `_metric` or `_phase` (the rules `feed_many` writes out), and its class is
        learned (True: `feed_many` takes the next ones in line). A class is told apart by one
        `is`; its `kind`, a class attribute read through the instance, cost more."""
        kind = record.kind
        if kind == _STEP:
            self._step(record.rank or 0, t, d.k, d.tokens, d.real_tokens, d.n)
        elif kind == _METRIC:
            self._metric(record.rank or 0, t, d.key, d.value, d.via, record.src, d.step)
        elif kind == _PHASE:
            self._phase(record.rank, t, d.name, d.s, d.n)
        else:
            self._handlers[kind](record, d, t)
            if kind in _SAMPLERS:
                _SAMPLER_KINDS[cls] = kind
            return False
        _CLASSES[(_STEP, _METRIC, _PHASE).index(kind)] = cls
        return True

    def _on_step(self, record: dict[str, Any], d: dict[str, Any], t: float) -> None:
        get = d.get
        self._step(record.get("rank") or 0, t, get("k"), get("tokens"), get("real_tokens"), get("n"))

    def _step(self, r: Any, t: float, k: Any, tokens: Any, real: Any, n: Any) -> None:
        """`r` is the record's rank, None already read as 0."""
        if r != self.rank_model.clock_rank:  # the node's local rank 0 is its step clock
            self.ranks.step(r, t, k if isinstance(k, int) and k > 0 else 1)
            return
        ranks = self.ranks
        if ranks.clock is None:  # else the clock's window is this rank's (`RankTimes`)
            ranks.step(r, t, k if isinstance(k, int) and k > 0 else 1)
        ledger = self.ledger
        ledger.step(t)
        self.clock.step_values(t, k, tokens, real, n)
        self.data_window.step(t, ledger.phase_s.get("data", 0.0))

    def _on_metric(self, record: dict[str, Any], d: dict[str, Any], t: float) -> None:
        get = d.get
        self._metric(
            record.get("rank") or 0, t, get("key"), get("value"), get("via"), record.get("src"),
            get("step"),
        )

    def _metric(
        self, r: Any, t: float, key: Any, value: Any, via: Any, src: Any, step: Any
    ) -> None:
        kind_v = type(value)
        if kind_v is float:
            if value - value != 0.0:  # infinite or NaN
                return
        elif kind_v is int:
            value = float(value)
        else:
            value = num(value)
        if type(key) is not str and not isinstance(key, str) or value is None:
            return
        emitted = via == "emit" if via else src == "emit"
        via = via if isinstance(via, str) else None
        taken = self.series.add(key, value, via, emitted, step, r if isinstance(r, int) else 0)
        if taken and self._points is not None:
            self._point(key, value, step, t)

    def _point(self, key: str, value: float, step: Any, t: float) -> None:
        """The point a view draws for a value taken: (key, step, value, seconds since the run's
        start, tokens seen by then). The step is the value's own when the loop logged one, else
        the step count; the tokens those of that step (scaled when the value's step is not the
        count's), None while tokens are not counted."""
        clock = self.clock
        steps = clock.steps
        if type(step) is int or isinstance(step, int) and not isinstance(step, bool):
            x = step
        else:
            x = steps
        tokens: float | None = None
        if clock.has_tokens or clock.declared_per_step is not None:
            tokens = clock.tokens_seen
            if x != steps and steps > 0:
                tokens = tokens * x / steps  # the loop logged a step the count has passed
        t0 = self.t0
        self._points.append((key, x, value, t - t0 if t > t0 else 0.0, tokens))  # type: ignore[union-attr]

    def listen(self) -> None:
        """Keep the points of the values taken (`take_points`), for a view that draws them."""
        if self._points is None:
            self._points = []

    def take_points(self) -> list[tuple[str, int, float, float, float | None]]:
        """The points of the values taken since the last call (`_point`), oldest first: what
        every view and export draws of the loop's series, so they all follow the engine's
        rank rule (`series.py`). Starts listening on the first call."""
        points = self._points
        if points is None:
            self._points = []
            return []
        if not points:
            return points
        self._points = []
        return points

    def _on_phase(self, record: dict[str, Any], d: dict[str, Any], t: float) -> None:
        self._phase(record.get("rank"), t, d.get("name"), d.get("s"), d.get("n"))

    def _phase(self, rank: Any, t: float, name: Any, seconds: Any, n: Any) -> None:
        if (rank or 0) != self.rank_model.clock_rank:  # `RankModel.is_clock`
            return
        if type(seconds) is float:
            if seconds - seconds != 0.0:
                return
        else:
            seconds = num(seconds)
        if isinstance(name, str) and seconds is not None and seconds >= 0:
            self.ledger.phase(name, seconds, n if isinstance(n, int) and n > 0 else 1, t)

    def _on_comm(self, record: dict[str, Any], d: dict[str, Any], t: float) -> None:
        r = record.get("rank") or 0
        self.stragglers.add(r if isinstance(r, int) else 0, d, t)
        if not self.rank_model.is_clock(r):
            return
        seconds, spans = num(d.get("s")), num(d.get("spans_s")) or 0.0
        calls = d.get("calls")
        if seconds is not None and seconds >= 0:  # waits inside eval/checkpoint stay there
            n = calls if isinstance(calls, int) and calls > 0 else 1
            self.ledger.phase("comm", max(seconds - max(spans, 0.0), 0.0), n, t)

    def _on_fact(self, record: dict[str, Any], d: dict[str, Any], t: float) -> None:
        key = d.get("key")
        if key == "device":
            dev = d.get("value")
            if isinstance(dev, dict):
                ident = (record.get("rank") or 0, dev.get("uuid") or dev.get("index"))
                self.devices[ident] = dev
                self.facts.touch()  # what is derived from the devices too is derived again
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
        self.agent_seen = True
        clock_rank = self.rank_model.clock_rank
        self.rank_model.hello(record.get("rank"), d)
        self.ranks.clock_moved(clock_rank, self.rank_model.clock_rank)
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
        self.t0 = t
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
        self.end = dict(d)
        for key in ("exit_status", "signal", "elapsed_s"):
            if key in d:
                self.run[key] = d[key]

    def _on_gpu(self, record: dict[str, Any], d: dict[str, Any], t: float) -> None:
        self.gpu.sample(t, d)

    def _on_host(self, record: dict[str, Any], d: dict[str, Any], t: float) -> None:
        self.host.sample(t, d)

    def _on_node(self, record: dict[str, Any], d: dict[str, Any], t: float) -> None:
        self.node.sample(t, d)

    def _on_memory(self, record: dict[str, Any], d: dict[str, Any], t: float) -> None:
        rank = record.get("rank")
        self.memory.sample(rank if isinstance(rank, int) else None, t, d)

    # ---- output ------------------------------------------------------------------------

    def _comm_section(self, finished: bool) -> Section:
        """comm (each rank's compute and wait per step) and straggler (engine/stragglers.py)."""
        out = Section()
        comm, straggler, absent = self.stragglers.snapshot(
            finished, self.world_size, self.rank_model.clock_rank
        )
        if comm is not None:
            out.values["comm"] = comm
        if straggler is not None:
            out.values["straggler"] = straggler
        out.absent.update(absent)
        return out

    def shape(self) -> ModelShape | None:
        return model_flops.shape_of(self.facts)

    def no_agent(self) -> str | None:
        """Why nothing counts steps and tokens (no agent said hello, or the agent saw no step
        signal in the loop: the `step_signal` fact "none"), or None when they are counted."""
        if self.agent_seen:
            unseen = self.facts.get("step_signal")
            if unseen is not None and unseen.value == "none" and not self.clock.records:
                return unseen.note
            return None
        reason = self.facts.value("observe_only")
        if reason is not None:
            return (
                f"observe only ({reason}): no agent runs in the training process, so steps and "
                "tokens are not counted"
            )
        when = "" if self.ledger.t_end is not None else " yet"
        return (
            f"no agent has spoken from the training process{when} (--no-agent, tm attach, or a "
            "program that is not Python): steps and tokens are not counted; run the Python "
            "training script under tm to count them"
        )

    def position(self) -> dict[str, Any]:
        """Where the run is now: the x values of every chart. Cheap: no snapshot is built."""
        fpt, _ = model_flops.choose(self.facts)
        value = fpt["value"] if fpt else None
        seen = self.clock.tokens_seen
        return {
            "step": self.clock.steps,
            "tokens": seen,
            "flops": None if value is None else value * seen,
        }

    def snapshot(self, now: float | None = None) -> dict[str, Any]:
        """Compose the parts, in this order; each gets what it needs from the earlier ones by
        name, and gives back its own values, absent reasons, explanations and warnings."""
        p = _Parts(self.no_agent(), self.ledger.t_end is not None, self.shape())
        self._pace(p)
        self._devices(p)
        self._accounts(p, now)
        whole = Section()
        for part in (
            p.pace, p.model, p.progress, p.utilization, p.counters, p.energy, p.gpus.section,
            self.host.section(), self.node.section(), p.memory, self.series.section(),
            p.time_split, p.waits, p.executed, p.planned, p.spent, models.section(self.facts),
            notices.section(self.facts, self.clock, self.ignored),
        ):
            whole.merge(part)
        snap = whole.values
        snap["alerts"] = self._alerts(p, now)
        snap["facts"] = self.facts.snapshot()
        if self.run:
            snap["run"] = dict(self.run)
        clock = self.clock
        death = self.death.section(
            {**self.end, **self.run}, p.finished, clock.last_t, self.ledger.t_end,
            clock.record_interval.value,
        )
        if death is not None:
            snap["death"] = death
        snap["job"] = self.rank_model.snapshot()
        if self.hello:
            snap["agent"] = {
                k: self.hello[k]
                for k in ("world_size", "probes", "python", "versions")
                if k in self.hello
            }
        snap["records"] = {"fed": self.records, "ignored": self.ignored}
        snap["explain"] = whole.explain
        self._insight(p, whole, snap["alerts"])
        snap["warnings"] = whole.warnings
        finite_only(snap, whole.absent)  # no infinity or NaN leaves the engine
        snap["absent"] = whole.absent
        return snap

    def sample(
        self, now: float | None = None, keys: frozenset[str] | None = None
    ) -> dict[str, Any]:
        """The snapshot's numbers a chart draws along the run (`SAMPLED`: steps, tokens, the
        rates, MFU, OFU, the ladder, the GPUs, energy, memory, host, node, the time split,
        progress), composed by the same parts as `snapshot`, so equal to its values, without
        the parts no chart draws (alerts, explanations, advice, facts). A replay hands it to its
        observers up to 2,000 times along a run; the final snapshot is a whole one.

        `keys`: the only top-level keys wanted (what the observers read, `reads`): the others
        are left out, and the parts that give only those (the budget, energy) are not
        composed. Every key kept is the same number either way."""
        p = _Parts(self.no_agent(), self.ledger.t_end is not None, self.shape())
        self._pace(p, detail=False, progress=keys is None or not keys.isdisjoint(_BUDGET_KEYS))
        self._devices(p, detail=False, energy=keys is None or "energy" in keys, keys=keys)
        p.time_split = self.ledger.section(
            self.t_last, now, self.probes, p.no_agent, self.world_size, detail=False
        )
        # the parts' values as `Section.merge` takes them (the first part to give a key keeps
        # it); their absent reasons, explanations and warnings are not handed on
        snap = _merged(
            p.pace.values, p.model.values, p.progress.values, p.utilization.values,
            p.counters.values, p.energy.values, p.gpus.section.values, self.host.values(),
            self.node.values(), p.memory.values, p.time_split.values, keys,
        )
        untokened = samples.no_tokens(self.clock, p.tokens_seen)  # as `_insight` says it
        if untokened is not None:
            snap.pop("tokens_seen", None)
        finite_only(snap, {})
        return snap

    def _pace(self, p: _Parts, detail: bool = True, progress: bool = True) -> None:
        """The step clock, the model's FLOPs per token, and the budget's progress (`progress`
        False: left out, for a `sample` whose readers want none of `_BUDGET_KEYS`)."""
        clock, facts = self.clock, self.facts
        p.pace = pace = throughput.section(
            clock, self.ranks, p.no_agent, self.world_size, self.rank_model.clock_rank,
            p.finished, detail,
        )
        p.tokens_seen = pace.values.get("tokens_seen")
        p.tps = pace.values.get("tokens_per_s")
        p.model = model = (
            model_flops.section(facts, p.tokens_seen) if detail
            else model_flops.sample_section(facts, p.tokens_seen)
        )
        p.fpt = fpt = model.values.get("flops_per_token")
        p.fpt_reason = model.absent.get("flops_per_token") or model.absent.get("flops_spent")
        if not progress:
            p.progress = _NOTHING
            return
        p.progress = budget.section(
            facts,
            steps=pace.values.get("steps"),
            steps_reason=pace.absent.get("steps") or pace.absent.get("tokens_seen"),
            tokens_seen=p.tokens_seen,
            tokens_per_step=clock.counted_per_step,
            tokens_per_step_source=(
                "declared (--tokens-per-step or emitted)"
                if clock.declared_per_step is not None
                else "detected in the batches by the agent"
            ),
            tokens_per_s=p.tps,
            step_time_s=pace.values.get("step_time_s"),
            flops_per_token=fpt["value"] if fpt else None,
            flops_reason=p.fpt_reason,
            finished=p.finished,
        )

    def _devices(
        self, p: _Parts, detail: bool = True, energy: bool = True,
        keys: frozenset[str] | None = None,
    ) -> None:
        """The GPUs and their peak, MFU, the GPU counters and energy (`detail` False: without
        their explanations, for `sample`, whose GPU part is made again only after what it reads
        moved: a fact or a device fact (`FactStore.version`), the sampled GPUs' names,
        selection, versions or measured peaks (`GpuCounters.layout`); `keys`: a sample's, the
        counters' values no reader reads left out)."""
        facts, gpu = self.facts, self.gpu
        p.gpus = gpus = devices.section(facts, self.devices, gpu, self.cards.spec) if detail else (
            facts.derived(
                "sample.devices",
                lambda: devices.section(facts, self.devices, gpu, self.cards.spec),
                gpu.layout,
            )
        )
        p.utilization = utilization = mfu.section(
            flops_per_token=p.fpt,
            flops_reason=p.fpt_reason,
            tokens_per_s=p.tps,
            tokens_reason=p.pace.absent.get("tokens_per_s"),
            peak=gpus.peak,
            peak_reason=gpus.peak_reason,
            n_gpus=gpus.n_gpus,
            n_gpus_source=gpus.n_gpus_source,
            shape=p.shape,
            precision=_precision(self.facts),
            detail=detail,
        )
        p.mfu = utilization.values.get("mfu")
        p.mfu_reason = utilization.absent.get("mfu")
        p.counters = self.gpu.section(
            gpus.covered, mfu=p.mfu, mfu_reason=p.mfu_reason, peak=gpus.peak,
            peak_reason=gpus.peak_reason, detail=detail, keys=keys,
        )
        p.energy = self.gpu.energy.section(
            gpus.covered, p.tokens_seen, self.gpu.unavailable, detail
        ) if energy else _NOTHING
        p.memory = self.memory.section()

    def _accounts(self, p: _Parts, now: float | None) -> None:
        """The time split, the cost, the counted FLOPs and the plan."""
        facts, gpus = self.facts, p.gpus
        p.time_split = time_split = self.ledger.section(
            self.t_last, now, self.probes, p.no_agent, self.world_size
        )
        p.waits = self._comm_section(p.finished)
        elapsed = (time_split.values.get("time") or {}).get("elapsed_s")
        p.spent = cost.section(
            n_gpus=gpus.n_gpus,
            n_gpus_source=gpus.n_gpus_source,
            elapsed_s=elapsed if elapsed is not None else self.run.get("elapsed_s"),
            flops_per_token=p.fpt,
            tokens_seen=p.tokens_seen,
            flops_spent=p.model.values.get("flops_spent"),
        )
        p.executed = counted.section(
            facts, tokens_seen=p.tokens_seen, tokens_per_s=p.tps, peak=gpus.peak,
            n_gpus=gpus.n_gpus, shape=p.shape, no_agent=p.no_agent, flops_per_token=p.fpt,
        )
        p.planned = budget.plan(
            facts,
            mfu=p.mfu,
            mfu_reason=p.mfu_reason,
            tokens_per_s=p.tps,
            peak_flops=(gpus.peak or {}).get("bf16_dense_flops"),
            n_gpus=gpus.n_gpus,
            flops_per_token=p.fpt["value"] if p.fpt else None,
            elapsed_s=elapsed,
            finished=p.finished,
            eta_s=p.progress.values.get("eta_s"),
            eta_reason=p.progress.absent.get("eta_s"),
            budget_tokens=p.progress.values.get("budget_tokens"),
        )

    def _alerts(self, p: _Parts, now: float | None) -> list[dict[str, Any]]:
        clock, node = self.clock, self.node
        return alerts.collect(
            data_window=self.data_window if "dataloader" in self.probes else None,
            throttle=self.gpu.throttle,
            straggler_named=p.waits.values.get("straggler"),
            last_step_t=clock.last_t,
            disk_trend=node.disk_trend,
            disk_path=(node.latest.get("disk") or {}).get("path"),
            now=now,
            finished=p.finished,
            step_interval_s=clock.record_interval.value,
            mfu=p.mfu,
            ofu=p.counters.values.get("ofu"),
        ) + self.memory.alerts()

    def _insight(self, p: _Parts, whole: Section, found: list[dict[str, Any]]) -> None:
        """Samples, the waterfall and advice: parts that take what the others found, by name,
        and say better where they speak (`Section.override`). Each is guarded: a fault in one
        leaves that part absent with the error as its reason, the rest of the snapshot whole.
        Order matters: the waterfall of a model without tokens ends at the samples' MFU."""
        pace, counters, time_split, gpus = p.pace, p.counters.values, p.time_split, p.gpus
        time = time_split.values.get("time")
        ladder = counters.get("ladder")
        got = _guarded("samples_per_s", "computing samples", lambda: samples.section(
            self.facts, self.clock, tokens_seen=p.tokens_seen,
            step_time=pace.values.get("step_time_s"),
            step_time_reason=pace.absent.get("step_time_s"),
            counted_utilization=(p.executed.values.get("counted") or {}).get("utilization"),
            peak=gpus.peak, peak_reason=gpus.section.absent.get("peak"), n_gpus=gpus.n_gpus,
        ))
        whole.override(got)
        whole.override(_guarded("waterfall", "building the waterfall", lambda: waterfall.section(
            mfu=p.mfu, mfu_reason=p.mfu_reason, counted=p.executed.values.get("counted"),
            samples=got.values.get("samples"), ladder=ladder,
            ladder_reason=p.counters.absent.get("ladder"), ofu=counters.get("ofu"),
            gpus=counters.get("gpus"), tensor_clocks=self.gpu.tensor_clocks(),
            time=time,
            time_reason=time_split.absent.get("time_split") or time_split.absent.get("time"),
            outside_phase_s=waterfall.phases_outside_window(
                time, self.ledger.before, self.ledger.tail
            ),
            comm_outside_s=waterfall.phases_outside_window(
                time, {"comm": self.ledger.before.get("comm", 0.0)},
                {"comm": self.ledger.tail.get("comm", 0.0)},
            ),
            peak_source=(gpus.peak or {}).get("source"),
        )))
        whole.override(_guarded("advice", "forming advice", lambda: Section(values={
            "advice": advice.advise(
                time=time, workers=num(self.facts.value("dataloader_workers")), ladder=ladder,
                straggler=p.waits.values.get("straggler"), padding=pace.values.get("padding"),
                alerts=found, gpus=counters.get("gpus"),
                memory=p.memory.values.get("memory"),
            ),
        }), fallback={"advice": []}))


def _merged(
    a: dict[str, Any], b: dict[str, Any], c: dict[str, Any], d: dict[str, Any],
    e: dict[str, Any], f: dict[str, Any], g: dict[str, Any], h: dict[str, Any],
    i: dict[str, Any], j: dict[str, Any], k: dict[str, Any], keys: frozenset[str] | None,
) -> dict[str, Any]:
    """The parts' values in one dict as `Section.merge` takes them: each key in the order it
    first appears, with the first part's value; only `keys` (None: every key). Merged by the
    dict display in C when no key is given twice (the lengths add up: the common case, a key
    per part), with the keys not wanted then deleted (the others keep their order); else one
    key at a time. A Python step per key of ~40 was most of `sample`'s own cost."""
    snap = {**a, **b, **c, **d, **e, **f, **g, **h, **i, **j, **k}
    if len(snap) != (
        len(a) + len(b) + len(c) + len(d) + len(e) + len(f) + len(g) + len(h) + len(i)
        + len(j) + len(k)
    ):  # a key given by two parts: the first keeps it
        snap = {}
        for values in (a, b, c, d, e, f, g, h, i, j, k):
            for key, value in values.items():
                if key not in snap and (keys is None or key in keys):
                    snap[key] = value
        return snap
    if keys is not None:
        for key in snap.keys() - keys:
            del snap[key]
    return snap


class _Parts:
    """What the parts of one snapshot found, by name, as `Engine.snapshot` composes them: each
    step (`_pace`, `_devices`, `_accounts`) sets its own and reads the earlier ones'."""

    pace: Section  # the step clock (throughput.py)
    tokens_seen: float | None
    tps: float | None  # tokens/s
    model: Section  # FLOPs per token (model_flops.py)
    fpt: dict[str, Any] | None  # the flops_per_token entry
    fpt_reason: str | None
    progress: Section  # the budget
    gpus: devices.Devices  # the GPUs, their count and peak
    utilization: Section  # MFU
    mfu: dict[str, Any] | None
    mfu_reason: str | None
    counters: Section  # the GPUs' own counters
    energy: Section
    memory: Section
    time_split: Section
    waits: Section  # each rank's compute and wait, the straggler (stragglers.py)
    spent: Section  # GPU-hours
    executed: Section  # counted FLOPs
    planned: Section  # the plan

    def __init__(self, no_agent: str | None, finished: bool, shape: ModelShape | None) -> None:
        self.no_agent = no_agent
        self.finished = finished
        self.shape = shape


def _guarded(
    key: str, doing: str, part: Any, fallback: dict[str, Any] | None = None
) -> Section:
    """`part()`, or, when it fails, `key` absent with the error (and `fallback`'s values)."""
    try:
        return part()  # type: ignore[no-any-return]
    except Exception as exc:  # noqa: BLE001 - one part's fault must not cost the snapshot
        return Section(
            values=dict(fallback or {}),
            absent={key: f"internal error while {doing}: {exc!r}"},
        )


def _precision(facts: Any) -> tuple[str, str | None] | None:
    """(the matmuls' precision, how it was read) from the `matmul_precision` fact."""
    fact = facts.get("matmul_precision")
    if fact is None or not isinstance(fact.value, str):
        return None
    return fact.value, fact.note
