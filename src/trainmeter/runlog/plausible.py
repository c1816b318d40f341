"""Whether a well-formed record can be true: the ranges `tm` believes.

The wire schema (`records.validate`) checks the envelope; this checks the values a record
claims. A buggy or forged record (a `step` of 10^30 optimizer steps, a trillion-trillion
tokens, a negative count, a number that overflowed to infinity) would otherwise be summed into
every number the run shows. Such a record is skipped and counted with its reason; the limits
are far above any real training (a million optimizer steps reported at once, 10^12 tokens in
one record) so a true record is never refused.

Some bounds need the run's history (`Ledger`): a rank cannot have finished more optimizer steps
or tokens, nor spent more seconds in a phase, than the time since `run.start` allows (steps at
most `MAX_STEPS_PER_S` a second, tokens `MAX_TOKENS_PER_S`, each phase no more seconds than have
passed). 50 `step` records of k = 999,999 in a 10 s run, or a checkpoint phase of 10^9 s, are
each under the one-record limits and were believed; they are not now. The ledger counts only
what it accepts and decides from the records' own times, so a replay of the log decides as the
live run did.

And some records only `tm` makes (`forged`): the run's start and end, the samplers' readings,
alerts, a fact whose source is a flag (`declared`) or one that counts what `tm` saw. From the
training processes' socket each of those is a forgery or a bug (an H100 put on a CPU box by a
`sample.gpu` that says `src: tm`, MFU 10^35 % from a `declared` peak), skipped and counted.
"""

from __future__ import annotations

from .. import payloads

TYPE_CHECKING = False  # typing costs milliseconds before the child starts
if TYPE_CHECKING:
    from typing import Any

#: More optimizer steps than this in one `step` record cannot be true.
MAX_STEPS_PER_RECORD = 1_000_000
#: More tokens than this in one `step` record cannot be true.
MAX_TOKENS_PER_RECORD = 10**12

#: Declared or detected facts that are counts or amounts: never negative.
NON_NEGATIVE_FACTS = frozenset(
    {
        "tokens_per_step",
        "flops_per_token",
        "n_params",
        "n_embedding_params",
        "n_frozen_params",
        "n_layers",
        "d_model",
        "seq_len",
        "dp",
        "moe_experts",
        "moe_top_k",
        "moe_routed_params",
        "moe_router_params",
        "moe_shared_params",
        "n_lookup_params",
        "n_vector_params",
        "attn_width",
        "segment_len",
        "budget_tokens",
        "budget_steps",
        "budget_flops",
        "plan_mfu",
        "plan_hours",
        "peak_flops",
        "counted_flops_per_token",
        "counted_flops_per_step",
        "agent_dropped_records",
        "ingest_dropped",
    }
)


#: Physical ranges of the facts a record may carry (the same as the flags that declare them
#: allow: `cli/args.py`): a count past them is a bug or a forgery, not a model.
FACT_RANGES: dict[str, tuple[float, float]] = {
    "tokens_per_step": (0, MAX_TOKENS_PER_RECORD),
    "samples_per_step": (0, 1e12),
    "flops_per_token": (0, 1e18),
    "counted_flops_per_token": (0, 1e18),
    "counted_flops_per_step": (0, 1e30),
    "n_params": (0, 1e16),
    "n_embedding_params": (0, 1e16),
    "n_frozen_params": (0, 1e16),
    "n_lookup_params": (0, 1e16),
    "n_vector_params": (0, 1e16),
    "moe_routed_params": (0, 1e16),
    "moe_router_params": (0, 1e16),
    "moe_shared_params": (0, 1e16),
    "n_layers": (0, 1e6),
    "d_model": (0, 1e8),
    "attn_width": (0, 1e8),
    "seq_len": (0, 1e10),
    "segment_len": (0, 1e10),
    "moe_experts": (0, 1e6),
    "moe_top_k": (0, 1e6),
    "dp": (0, 1e8),
    "dataloader_workers": (0, 1e6),
    "budget_tokens": (0, 1e18),
    "budget_steps": (0, 1e15),
    "budget_flops": (0, 1e32),
    "plan_mfu": (0, 1),
    "plan_hours": (0, 1e6),
    "peak_flops": (1e6, 1e18),  # FLOP/s of one device: 10^-6 to 10^6 TFLOP/s
}

#: What a training process may say it is (`src`); which kinds each may send is `payloads`'
#: table (a kind's `writers`), and the sources of the facts it may state are these.
AGENT_SRC = frozenset({"agent", "emit"})
AGENT_SOURCES = frozenset({"emitted", "tapped", "detected", "measured"})
#: Facts only `tm` states: what it counted or judged of the run from outside.
TM_FACTS = frozenset({"ingest_dropped", "notify_failures", "agent_rings_unread", "observe_only"})
#: A byte count past this (a pebibyte) is no device's or process's.
MAX_BYTES = 1 << 50
#: A rank, a world size or a node count past this is no job's.
MAX_RANKS = 1_000_000
#: A metric key longer than this is none the agent could send (its ring's key table holds
#: names of at most 64 KiB).
MAX_KEY_CHARS = 65_535
#: Uncaught exceptions one process can report: its main thread's and its threads' (a pool whose
#: threads die one by one); past this, a flood.
MAX_CRASHES_PER_PROCESS = 256
#: Optimizer steps a second one rank can finish: an optimizer step is at least a call into
#: `torch.optim` (tens of microseconds bare; a forward and backward of the smallest model,
#: hundreds). Ten times the fastest bare step measured here.
MAX_STEPS_PER_S = 100_000
#: Tokens a second one rank can take in (including padding): far past any device's.
MAX_TOKENS_PER_S = 1e10
#: Occurrences a second of a phase (a batch fetched, a checkpoint written).
MAX_EVENTS_PER_S = 1e6
#: Processes that may speak for one rank (a DataLoader worker, a forked child: a few each).
MAX_PROCESSES_PER_RANK = 256
#: The time a record may claim past `run.start` before its budget counts it (clock rounding).
BUDGET_SLACK_S = 1.0


class Implausible(ValueError):
    """A record that is well formed but cannot be true. The message's first part is the reason."""


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _all_finite(d: dict[str, Any]) -> bool:
    """Every number anywhere in `d` is finite (JSON's 1e400 parses as infinity).

    The flat dict of a `step` or `metric` (most records) takes the first loop only; nested
    values (GPU rows) go through an explicit stack, so no depth can overflow.
    """
    nested: list[Any] = []
    for value in d.values():
        kind = type(value)
        if kind is float:
            if value - value != 0.0:  # inf - inf and nan - nan are nan
                return False
        elif kind is dict or kind is list:
            nested.append(value)
    while nested:
        item = nested.pop()
        for value in item.values() if type(item) is dict else item:
            kind = type(value)
            if kind is float:
                if value - value != 0.0:
                    return False
            elif kind is dict or kind is list:
                nested.append(value)
    return True


def _in_range(kind: str, d: dict[str, Any], name: str, high: float | None = None) -> None:
    """`d[name]`, when present, is a number in [0, high]."""
    value = d.get(name)
    if value is None:
        return
    if not _number(value):
        raise Implausible(f"implausible {kind}: {name} is not a number")
    if value < 0:
        raise Implausible(f"implausible {kind}: {name}={value!r} is negative")
    if high is not None and value > high:
        raise Implausible(f"implausible {kind}: {name}={value!r} is above {high:g}")


#: A record's time lies in the run: from `run.start` (less this, for clock rounding) ...
BEFORE_START_S = 1.0
#: ... to no later than this after it (a year: far past any real run, far short of 1e300).
MAX_RUN_S = 366 * 86400.0


def in_run(kind: str, t: float, t_start: float | None, horizon: float) -> None:
    """A record at `t` of a run that started at `t_start` (None: not known yet) cannot lie
    before it or past `horizon` (the present, for records arriving live). Raises `Implausible`."""
    if t_start is not None and t < t_start - BEFORE_START_S:
        raise Implausible(f"implausible {kind}: t={t!r} is before run.start")
    if t > horizon or t_start is not None and t > t_start + MAX_RUN_S:
        raise Implausible(f"implausible {kind}: t={t!r} is after the run")


def _whole(kind: str, d: dict[str, Any], names: tuple[str, ...]) -> None:
    """Counts are whole numbers: `k=1.5` optimizer steps or `tokens=2.5` cannot be true
    (`tokens=1000.0` is whole: a writer that sends floats for counts is believed)."""
    for name in names:
        value = d.get(name)
        if value is not None and _number(value) and not float(value).is_integer():
            raise Implausible(f"implausible {kind}: {name}={value!r} is not a whole number")


STEP_COUNTS = ("k", "tokens", "real_tokens", "n", "micro")


def _step(d: dict[str, Any]) -> None:
    k, tokens, real = d.get("k"), d.get("tokens"), d.get("real_tokens")
    if (
        type(k) is int
        and 0 <= k <= MAX_STEPS_PER_RECORD
        and type(tokens) is int
        and 0 <= tokens <= MAX_TOKENS_PER_RECORD
        and real is None
        and type(d.get("n", 0)) is int
        and d.get("n", 0) >= 0
        and type(d.get("micro", 0)) is int
        and d.get("micro", 0) >= 0
    ):
        return  # the agent's usual record: whole numbers, all in range
    _in_range("step", d, "k", MAX_STEPS_PER_RECORD)
    _in_range("step", d, "tokens", MAX_TOKENS_PER_RECORD)
    _in_range("step", d, "real_tokens", MAX_TOKENS_PER_RECORD)
    _in_range("step", d, "n")
    _in_range("step", d, "micro")
    _whole("step", d, STEP_COUNTS)
    if _number(tokens) and _number(real) and real > tokens:
        raise Implausible("implausible step: more real tokens than tokens")


def _phase(d: dict[str, Any]) -> None:
    _in_range("phase", d, "s")
    _in_range("phase", d, "n")


def _fact(d: dict[str, Any]) -> None:
    key, value = d.get("key"), d.get("value")
    if key in NON_NEGATIVE_FACTS and _number(value) and value < 0:
        raise Implausible(f"implausible fact: {key}={value!r} is negative")
    bounds = FACT_RANGES.get(key) if isinstance(key, str) else None
    if bounds is not None and _number(value) and not bounds[0] <= value <= bounds[1]:
        raise Implausible(
            f"implausible fact: {key}={value!r} is outside {bounds[0]:g}..{bounds[1]:g}"
        )


def _comm(d: dict[str, Any]) -> None:
    _in_range("comm", d, "k", MAX_STEPS_PER_RECORD)
    for name in ("n", "s", "spans_s", "calls"):
        _in_range("comm", d, name)
    _whole("comm", d, ("k", "n", "calls"))
    if _number(d.get("s")) and _number(d.get("spans_s")) and d["spans_s"] > d["s"]:
        raise Implausible("implausible comm: more wait in spans than wait")


def _memory(d: dict[str, Any]) -> None:
    for name in d:
        if name.endswith("_b"):
            _in_range("memory", d, name, MAX_BYTES)
        elif name in ("alloc_retries", "ooms"):
            _in_range("memory", d, name)
    total = d.get("total_b")
    if d.get("device") == "cuda" and _number(total):  # the caching allocator holds no more
        for name in ("allocated_b", "reserved_b", "allocated_peak_b", "reserved_peak_b"):
            if _number(d.get(name)) and d[name] > total:
                raise Implausible(f"implausible memory: {name} is more than the card's {total:g} B")


def _metric(d: dict[str, Any]) -> None:
    key = d.get("key")
    if isinstance(key, str) and len(key) > MAX_KEY_CHARS:
        raise Implausible(f"implausible metric: a key of {len(key)} characters")


def _hello(d: dict[str, Any]) -> None:
    for name in ("world_size", "local_world_size", "nodes", "rank", "local_rank", "node_rank"):
        value = d.get(name)
        if value is not None and _number(value):
            _in_range("hello", d, name, MAX_RANKS)


_BY_KIND = {
    payloads.STEP.name: _step, payloads.PHASE.name: _phase, payloads.FACT.name: _fact,
    payloads.COMM.name: _comm, payloads.MEMORY.name: _memory, payloads.HELLO.name: _hello,
    payloads.METRIC.name: _metric,
}


def check(record: dict[str, Any]) -> None:
    """Raise `Implausible` when `record` (already valid on the wire) cannot be true."""
    kind = record["kind"]
    if record["t"] < 0:
        raise Implausible(f"implausible {kind}: t={record['t']!r} is before the clock started")
    rank = record.get("rank")
    if rank is not None and rank < 0:
        raise Implausible(f"implausible {kind}: rank {rank} is negative")
    if rank is not None and rank > MAX_RANKS:
        raise Implausible(f"implausible {kind}: rank {rank} is past any job's")
    pid = record.get("pid")
    if pid is not None and (not isinstance(pid, int) or isinstance(pid, bool) or pid < 0):
        raise Implausible(f"implausible {kind}: pid {pid!r} is not a process id")
    d = record["d"]
    if not _all_finite(d):
        raise Implausible(f"implausible {kind}: a number is not finite")
    rule = _BY_KIND.get(kind)
    if rule is not None:
        rule(d)


def forged(record: dict[str, Any]) -> str | None:
    """Why a record that came over the training processes' socket cannot be theirs, or None.

    Only `tm` writes the kinds `payloads` lists with `tm` alone as their writer (`run.start`,
    `run.end`, the samples, alerts), a native crash, `declared` facts (flags) and the facts it
    counts itself; a training process says it is `agent` or `emit`, as its kind's writers do."""
    kind = record["kind"]
    known = payloads.KINDS.get(kind)
    if known is None or known.only_tm:
        return f"forged {kind}: only tm writes it"
    src = record.get("src")
    if src not in AGENT_SRC or src not in known.writers:
        return f"forged {kind}: src {str(src)[:20]!r} from a training process"
    if kind == payloads.FACT.name:
        d = record["d"]
        if d.get("source") not in AGENT_SOURCES:
            return f"forged fact: source {str(d.get('source'))[:20]!r} from a training process"
        if d.get("key") in TM_FACTS:
            return f"forged fact: only tm states {d['key']}"
    elif kind == payloads.CRASH.name and record["d"].get("native"):
        return "forged crash: only tm reports a native crash"
    return None


_COUNTS = (int, float)


class Ledger:
    """What each process has done since `run.start`, and what the time elapsed allows it.

    Per process (its rank and pid): the steps and tokens of its `step` records, the seconds
    and occurrences of each of its phases. A record that would take a process past what
    `MAX_*_PER_S` allow in the time from `run.start` to the record's own `t` (a phase: past the
    time itself) is refused (`admit` raises) and not counted; the others are. A rank's records
    come from at most `MAX_PROCESSES_PER_RANK` processes (a pid made up per record cannot buy a
    budget per record)."""

    __slots__ = ("steps", "phases", "pids", "anchor")

    def __init__(self) -> None:
        self.steps: dict[tuple[Any, Any], list[Any]] = {}  # (rank, pid) -> [steps, tokens]
        self.phases: dict[tuple[Any, Any, Any], list[float]] = {}
        self.pids: dict[Any, set[Any]] = {}
        self.anchor: float | None = None  # the first record's time, when run.start is unknown

    def _elapsed(self, t: float, t_start: float | None) -> float:
        if t_start is None:
            if self.anchor is None:
                self.anchor = t
            t_start = self.anchor
        return max(t - t_start, 0.0) + BUDGET_SLACK_S

    def _process(self, rank: Any, pid: Any, kind: str) -> tuple[Any, Any]:
        rank = rank or 0
        pids = self.pids.get(rank)
        if pids is None:
            pids = self.pids[rank] = set()
        if pid not in pids:
            if len(pids) >= MAX_PROCESSES_PER_RANK:
                raise Implausible(
                    f"implausible {kind} rate: more than {MAX_PROCESSES_PER_RANK} "
                    f"processes say they are rank {rank}"
                )
            pids.add(pid)
        return rank, pid

    def admit(self, record: dict[str, Any], t_start: float | None) -> None:
        """Count a `step`, `phase`, `comm` or `crash` record, or raise `Implausible` (then
        nothing is counted): a process's comm wait is bounded like a phase's time, its crashes
        by `MAX_CRASHES_PER_PROCESS`. A replay's typed records (`runlog/typed.py`) give their
        fields to `step` and `phase` themselves."""
        kind = record["kind"]
        if kind == payloads.STEP.name:
            d = record["d"]
            self.step(record.get("rank"), record.get("pid"), record["t"], d.get("k"),
                      d.get("tokens"), t_start)
        elif kind == payloads.PHASE.name:
            d = record["d"]
            self.phase(record.get("rank"), record.get("pid"), record["t"], d.get("name"),
                       d.get("s"), d.get("n"), t_start)
        elif kind == payloads.COMM.name:
            d = record["d"]
            elapsed = self._elapsed(record["t"], t_start)
            key = (*self._process(record.get("rank"), record.get("pid"), kind), "comm wait")
            seen = self.phases.get(key) or [0.0, 0.0]
            s = seen[0] + (d["s"] if _number(d.get("s")) else 0.0)
            if s > elapsed:
                raise Implausible(
                    f"implausible comm wait: {s:.6g} s of waiting in {elapsed:.3g} s of the run"
                )
            self.phases[key] = [s, seen[1]]
        elif kind == payloads.CRASH.name:
            key = (*self._process(record.get("rank"), record.get("pid"), kind), "crashes")
            seen = self.phases.get(key) or [0.0, 0.0]
            if seen[1] >= MAX_CRASHES_PER_PROCESS:
                raise Implausible(
                    f"implausible crash: more than {MAX_CRASHES_PER_PROCESS} from one process"
                )
            self.phases[key] = [0.0, seen[1] + 1]

    def step(
        self, rank: Any, pid: Any, t: float, k: Any, tokens: Any, t_start: float | None
    ) -> None:
        """A `step` record's part of `admit` (a replay reads millions: the path written out, a
        few dictionary lookups and type tests)."""
        who = (rank or 0, pid)
        totals = self.steps.get(who)
        if totals is None:
            self._process(rank, pid, payloads.STEP.name)
            totals = self.steps[who] = [0, 0]
        if t_start is None:
            if self.anchor is None:
                self.anchor = t
            t_start = self.anchor
        elapsed = (t - t_start if t > t_start else 0.0) + BUDGET_SLACK_S
        steps = totals[0] + k if type(k) is int else totals[0]
        seen = totals[1] + tokens if type(tokens) in _COUNTS else totals[1]
        if steps > MAX_STEPS_PER_S * elapsed:
            raise Implausible(
                f"implausible step rate: {steps} steps in {elapsed:.3g} s of the run "
                f"(at most {MAX_STEPS_PER_S} a second)"
            )
        if seen > MAX_TOKENS_PER_S * elapsed:
            raise Implausible(
                f"implausible step rate: {seen:g} tokens in {elapsed:.3g} s of the run "
                f"(at most {MAX_TOKENS_PER_S:g} a second)"
            )
        totals[0], totals[1] = steps, seen

    def phase(
        self, rank: Any, pid: Any, t: float, name: Any, s: Any, n: Any, t_start: float | None
    ) -> None:
        """A `phase` record's part of `admit` (a third of a replay's records: written out too)."""
        if t_start is None:
            if self.anchor is None:
                self.anchor = t
            t_start = self.anchor
        elapsed = (t - t_start if t > t_start else 0.0) + BUDGET_SLACK_S
        key = (rank or 0, pid, name)
        seen = self.phases.get(key)
        if seen is None:  # a process's first of this phase: its pid is counted for its rank
            self._process(rank, pid, payloads.PHASE.name)
            seen = self.phases[key] = [0.0, 0.0]  # (counted below, or left at 0 when refused)
        s = seen[0] + (s if type(s) in _COUNTS or _number(s) else 0.0)
        n = seen[1] + (n if type(n) in _COUNTS or _number(n) else 0.0)
        if s > elapsed:
            raise Implausible(
                f"implausible phase time: {s:.6g} s of {str(name)[:20]} "
                f"in {elapsed:.3g} s of the run"
            )
        if n > MAX_EVENTS_PER_S * elapsed:
            raise Implausible(
                f"implausible phase time: {n:g} occurrences in {elapsed:.3g} s of the run"
            )
        seen[0], seen[1] = s, n
