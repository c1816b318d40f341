"""Bounded history of every series a view draws: memory that does not grow with the run.

A live view wants the whole curve of a run (loss, tokens/s, MFU...) against step, tokens,
FLOPs spent or wall time, but a run of ten million steps must cost no more memory than one of
ten thousand. So each series keeps at most `capacity` buckets. A bucket stands for a run of
consecutive points and keeps their minimum, maximum and last value (a one-step loss spike
survives any amount of merging) and the step, tokens and time of its last point. When the
buckets are full, neighbours merge pairwise and each bucket from then on takes twice as many
points: the curve keeps its shape at half the resolution, and the cost per point stays O(1).

FLOPs spent are not stored: under one convention a run spends FLOPs per token times tokens, so
the FLOPs axis is the tokens axis scaled by the latest FLOPs per token (`flops_per_token`),
and it is absent, not zero, while that number is unknown.

Pure: no I/O, no clock. It reads no record: it is fed the engine's points (`on_points`: the
loop's values the engine took, by its one rank rule, at their step, tokens and time) and
snapshots (`on_snapshot`: tokens/s, MFU, step time, GPU counters... become points at the
snapshot's step, tokens and time).
"""

from __future__ import annotations

from itertools import compress, repeat
from operator import add, countOf, eq, itemgetter
from typing import Any

from ..snapread import finite as _number
from .history_walk import walk as _walk

#: The x axes a series can be drawn against.
AXES = ("step", "tokens", "flops", "time")

#: Buckets per series. 2048 points is more than a chart's width in pixels.
DEFAULT_CAPACITY = 2048

#: Integers up to this size are exactly floats (a larger one goes through `snapread.finite`).
_EXACT = 2**53

#: A block of points of at most this many keys is cut by key in C, one pass a key
#: (`History.on_points`); one of more keys in one Python pass.
_CUT_BY_KEY = 8

#: a point's fields (`Engine.take_points`: key, step, value, time, tokens)
_KEY, _STEP, _VALUE, _TIME, _TOKENS = map(itemgetter, range(5))

#: At most this many series (a loop that logs thousands of keys must not grow memory either).
MAX_SERIES = 256

#: Snapshot numbers drawn as series: name -> (path into the snapshot, unit, label).
SNAPSHOT_SERIES: dict[str, tuple[tuple[str, ...], str, str]] = {
    "tokens_per_s": (("tokens_per_s",), "tokens/s", "Tokens per second"),
    "step_time_s": (("step_time_s",), "s", "Step time"),
    "mfu": (("mfu", "value"), "ratio", "MFU"),
    "ofu": (("ofu", "value"), "ratio", "OFU"),
    "goodput": (("time", "goodput"), "ratio", "Goodput"),
    "gpu_util": (("ladder", "mean", "gpu_util"), "ratio", "GPU util (mean)"),
    "sm_active": (("ladder", "mean", "sm_active"), "ratio", "SM active (mean)"),
    "tensor_active": (("ladder", "mean", "tensor_active"), "ratio", "Tensor active (mean)"),
    "power_w": (("gpus", "*", "power_w"), "W", "GPU power (sum)"),
    "gpu_memory_used_b": (("gpus", "*", "memory_used_b"), "B", "GPU memory used (sum)"),
    "memory_reserved_b": (("memory", "ranks", "*", "reserved_b"), "B", "Reserved by the allocator (sum of ranks)"),
    "memory_allocated_b": (("memory", "ranks", "*", "allocated_b"), "B", "Allocated tensors (sum of ranks)"),
    "memory_alloc_retries": (("memory", "alloc_retries",), "count", "Allocation retries"),
    "host_rss_b": (("host", "rss_b"), "B", "Training processes' memory (RSS)"),
    "host_cpu_cores": (("host", "cpu_cores"), "cores", "Training processes' CPU"),
    "node_memory_used_b": (("node", "memory", "used_b"), "B", "Node memory used"),
    "node_disk_read_b_s": (("node", "rates_b_s", "disk_io_read_b"), "B/s", "Disk read"),
    "node_disk_write_b_s": (("node", "rates_b_s", "disk_io_write_b"), "B/s", "Disk write"),
    "node_net_rx_b_s": (("node", "rates_b_s", "net_rx_b"), "B/s", "Network received"),
    "node_net_tx_b_s": (("node", "rates_b_s", "net_tx_b"), "B/s", "Network sent"),
}

#: Ranks whose compute a step is drawn, one series each (`comm.ranks.<rank>.compute_s`): the
#: rank the others wait for is the highest line. The first ones by rank number, so a job of
#: hundreds of ranks on one node still costs a bounded number of series.
RANK_SERIES = 16
RANK_PREFIX = "rank_compute_s:"

#: Snapshot shares drawn as their complement: name -> (path, unit, label); 1 - idle is busy.
SNAPSHOT_COMPLEMENTS: dict[str, tuple[tuple[str, ...], str, str]] = {
    "node_cpu_busy": (("node", "cpu", "idle"), "ratio", "Node CPU busy"),
}


def _dig(snap: dict[str, Any], path: tuple[str, ...]) -> float | None:
    """The number at `path`; a "*" sums that level's values (None if none are numbers).

    The rule `History.on_snapshot` follows, walked there in line (a call a level costs more
    than the walk); tests/views/test_history.py holds the two equal on odd shapes."""
    node: Any = snap
    for i, part in enumerate(path):
        if part == "*":
            if not isinstance(node, dict):
                return None
            values = [_dig(v, path[i + 1 :]) for v in node.values() if isinstance(v, dict)]
            numbers = [v for v in values if v is not None]
            return sum(numbers) if numbers else None
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    kind = type(node)  # the common answers first, without the general checks
    if kind is float:
        return node if node - node == 0.0 else None
    return float(node) if kind is int and -_EXACT <= node <= _EXACT else _number(node)


def _table(
    series: dict[str, tuple[tuple[str, ...], str, str]], complement: bool
) -> list[tuple[str, str, tuple[str, ...], bool, str, str]]:
    """The series of a table by the snapshot key their path starts at: (key, name, path,
    complement, unit, label), so a snapshot without that key (no GPU, no memory record) costs
    one lookup for all of its series."""
    return [(path[0], name, path[1:], complement, unit, label)
            for name, (path, unit, label) in series.items()]


#: Both tables, in the order a snapshot's points are added (`History.on_snapshot`).
_DRAWN = _table(SNAPSHOT_SERIES, False) + _table(SNAPSHOT_COMPLEMENTS, True)


def _by_key(
    drawn: list[tuple[str, str, tuple[str, ...], bool, str, str]],
) -> tuple[tuple[str, tuple[tuple[str, tuple[str, ...], Any, bool, str, str], ...]], ...]:
    """`drawn` cut into runs of one snapshot key: (key, ((name, before, after, complement,
    unit, label), ...)), so a snapshot is looked up once per key and its paths are walked in
    line rather than through `_dig`: `before` is the path up to a "*", `after` the path after
    it (None without one: the number is at `before`). Runs, not groups: the series keep
    `drawn`'s order (the order they are created in, which `dump()` shows)."""
    runs: list[tuple[str, list[tuple[str, tuple[str, ...], Any, bool, str, str]]]] = []
    for key, name, path, complement, unit, label in drawn:
        if not runs or runs[-1][0] != key:
            runs.append((key, []))
        if path.count("*") > 1:
            raise ValueError(f"{name}: at most one '*' a path")
        at = path.index("*") if "*" in path else len(path)
        after = path[at + 1 :] if at < len(path) else None
        runs[-1][1].append((name, path[:at], after, complement, unit, label))
    return tuple((key, tuple(entries)) for key, entries in runs)


_DRAWN_BY_KEY = _by_key(_DRAWN)

#: The system series' names, in the order of a snapshot's row (`SnapshotRows`).
_NAMES = tuple(name for _key, name, _path, _c, _u, _l in _DRAWN)
_SYSTEM = frozenset(_NAMES)


def _walk_source(
    runs: tuple[tuple[str, tuple[tuple[str, tuple[str, ...], Any, bool, str, str], ...]], ...],
) -> str:
    """`History.on_snapshot`'s walk of the tables, written out as one function of straight code
    (`walk(history, snap, step, tokens, time)` -> the points added to series that existed,
    kept as one row of the snapshot's numbers in `History.table`, in `_NAMES`' order):
    for each snapshot key one lookup, then each series' path walked a `dict.get` at a time (a
    level shared by several series of that key walked once: `get` changes nothing), the number
    rule of `_dig`, and the point added, in the tables' order. The loop over the tables it
    replaces spent ~1,700 bytecodes a sample on the tuples, the parts of each path and their
    loops; this is the same walk without them (tests/views/test_history.py holds it equal to
    `_dig` on odd shapes).

    The source of the module `views/history_walk.py`, which holds it: compiled from a string at
    every import it cost each replay's start ~33M instructions (3-4 ms); a module's bytecode is
    cached. `python -m trainmeter.views.history` writes it again after a change to the tables
    (tests/views/test_history.py fails while it is stale)."""
    slot = {name: i for i, name in enumerate(_NAMES)}
    out = [_WALK_HEADER, "def walk(self, snap, step, tokens, time):",
           "    series_of = self.series", "    get = snap.get", f"    row = [None] * {len(slot)}"]

    def number(node: str, indent: str, then: list[str]) -> list[str]:
        """`value` from `node` by the number rule; `then` runs when it is one."""
        return [
            f"{indent}if type({node}) is float:",
            f"{indent}    value = {node} if {node} - {node} == 0.0 else None",
            f"{indent}elif type({node}) is int and -_EXACT <= {node} <= _EXACT:",
            f"{indent}    value = float({node})",
            f"{indent}else:",
            f"{indent}    value = _number({node})",
            f"{indent}if value is not None:",
            *then,
        ]

    def add(name: str, complement: bool, unit: str, label: str, indent: str) -> list[str]:
        return [
            *([f"{indent}value = 1.0 - value"] if complement else []),
            f"{indent}if {name!r} in series_of:",
            f"{indent}    row[{slot[name]}] = value",
            f"{indent}else:",
            f"{indent}    self.add({name!r}, 'system', value, step, tokens, time, {unit!r}, "
            f"{label!r})",
        ]

    for key, entries in runs:
        out += [f"    top = get({key!r})", "    if top is not None:"]
        walked: dict[tuple[str, ...], str] = {(): "top"}
        for name, before, after, complement, unit, label in entries:
            for depth in range(1, len(before) + 1):  # each level of the path, once a key
                prefix = before[:depth]
                if prefix not in walked:
                    up, var = walked[prefix[:-1]], f"n{len(walked)}"
                    out.append(f"        {var} = {up}.get({prefix[-1]!r}) "
                               f"if isinstance({up}, dict) else None")
                    walked[prefix] = var
            node = walked[before]
            if after is None and not before:  # the number at the key (`top`: not None)
                out += number(node, " " * 8, add(name, complement, unit, label, " " * 12))
                continue
            if after is None:  # the number at the path
                out += [f"        if {node} is not None:",
                        *number(node, " " * 12, add(name, complement, unit, label, " " * 16))]
                continue
            # a "*": the sum of the numbers at `after` in each of this level's values
            out += [f"        if isinstance({node}, dict):",
                    "            numbers = []",
                    f"            for item in {node}.values():",
                    "                if isinstance(item, dict):"]
            for i, part in enumerate(after):
                out.append(f"                    item = item.get({part!r})" if i == 0 else
                           f"                    item = item.get({part!r}) "
                           "if isinstance(item, dict) else None")
            out += number("item", " " * 20, [" " * 24 + "numbers.append(value)"])
            out += ["            if numbers:", "                value = sum(numbers)",
                    *add(name, complement, unit, label, " " * 16)]
    out += [f"    added = {len(slot)} - row.count(None)",
            "    if added:",
            "        self.table.rows.append((step, tokens, time, row))",
            "    return added"]
    return "\n".join(out) + "\n"


#: The written-out walk's module, before its function.
_WALK_HEADER = f'''"""`History.on_snapshot`'s walk of the snapshot tables, written out by `views/history.py`
(`_walk_source`) from its `SNAPSHOT_SERIES` and `SNAPSHOT_COMPLEMENTS`. Do not edit: after a
change to the tables, `python -m trainmeter.views.history` writes it again."""

from ..snapread import finite as _number

_EXACT = {_EXACT!r}  # integers up to this size are exactly floats

'''


#: Points a series holds before it puts them in its buckets (`BoundedSeries.store`): a view
#: is handed points a block at a time (a replay's thousands of blocks, ~2,000 snapshots; a
#: live run's every record), and storing a few hundred at once costs a few C calls where each
#: point cost a Python loop's turn. A reader never sees them pending (the buckets are stored
#: first), and the memory stays bounded: at most this many tuples a series.
PENDING = 512


#: A bucket of at least this many points finds its min and max by sorting (`_low_high`)
_SORT_FROM = 16


def _low_high(up: list[Any], down: list[Any]) -> tuple[Any, Any]:
    """`min(up)` and `max(down)` (two copies of one run of numbers, none of them NaN), the same
    objects: a stable sort keeps equal numbers (0.0 and -0.0 too) in their order, so the
    ascending sort's first is `min`'s (the first of the least) and the descending sort's first
    is `max`'s. The sort compares floats in C without the generic comparison `min` and `max`
    make for each number, and a monotonic run (a loss curve) costs it one pass."""
    up.sort()
    down.sort(reverse=True)
    return up[0], down[0]


def _stored(slot: str, doc: str) -> Any:
    """A bucket field, read after the pending points are stored (`BoundedSeries.store`)."""
    member = getattr(BoundedSeries, slot)

    def read(self: BoundedSeries) -> Any:
        self.settle()
        return member.__get__(self, BoundedSeries)

    return property(read, doc=doc)


class BoundedSeries:
    """One series: at most `capacity` buckets of (min, max, last) at the last point's x.

    `epoch` grows at each merge, so a reader that sent the first n buckets can tell whether
    they still stand (same epoch: only bucket n-1 may have changed since) or were re-cut.

    Points are added to `pending` (the engine's point tuples: key, step, value, time, tokens)
    and stored in the buckets a few hundred at a time (`store`): the buckets are the ones a
    point at a time makes (every bucket full but the last, a merge when a point finds them all
    full), the same numbers (min and max folded in the points' order) and the same objects.
    The bucket fields (`lo`, `hi`, `last`, `count`, `step`, `tokens`, `time`, `span`, `epoch`,
    `points`) store what is pending before they are read.
    """

    __slots__ = (
        "name",
        "group",
        "unit",
        "label",
        "capacity",
        "pending",
        "table",
        "_span",
        "_epoch",
        "_points",
        "_step",
        "_tokens",
        "_time",
        "_lo",
        "_hi",
        "_last",
        "_count",
    )

    def __init__(
        self, name: str, group: str, unit: str = "", label: str = "", capacity: int = DEFAULT_CAPACITY
    ) -> None:
        if capacity < 2 or capacity % 2:
            raise ValueError("capacity must be an even number of at least 2")
        self.name = name
        self.group = group
        self.unit = unit
        self.label = label or name
        self.capacity = capacity
        self.pending: list[tuple[Any, ...]] = []  # points not stored yet, oldest first
        #: a history's snapshot rows not stored yet (`SnapshotRows`), None outside a history
        self.table: SnapshotRows | None = None
        self._span = 1  # points per full bucket
        self._epoch = 0
        self._points = 0  # points ever stored
        self._step: list[float | None] = []
        self._tokens: list[float | None] = []
        self._time: list[float | None] = []
        self._lo: list[float] = []
        self._hi: list[float] = []
        self._last: list[float] = []
        self._count: list[int] = []

    def __len__(self) -> int:
        self.settle()
        return len(self._count)

    def settle(self) -> None:
        """Everything added stored in the buckets: the history's snapshot rows that may hold
        this series' points (`SnapshotRows.store`), then `pending` (`store`)."""
        table = self.table
        if table is not None and table.rows:
            table.store()
        if self.pending:
            self.store()

    def add(
        self, value: float, step: float | None, tokens: float | None, time: float | None
    ) -> None:
        """One point; the caller gives points in run order."""
        table = self.table
        if table is not None and table.rows and self.name in _SYSTEM:  # (older points first)
            table.store()
        pending = self.pending
        pending.append((None, step, value, time, tokens))
        if len(pending) >= PENDING:
            self.store()

    def store(self) -> None:
        """Put the pending points in the buckets, as `add` one point at a time did: the open
        bucket takes what it has room for, then buckets of `span` points open while there is
        room, and when a point finds every bucket full they merge pairwise (`_merge`) and it
        opens the next. A bucket's min and max are `min` and `max` over its points in order
        (the open bucket's own first: the fold `if value < lo` made, a NaN and ties of 0.0 and
        -0.0 included), its last point's step, tokens and time its own. All in C: the values
        read out once (`map`), small buckets' `min(a, b, ...)` mapped over strided slices, big
        ones' by two sorts (`_low_high`, when no NaN is among them), the x of each bucket's
        last point only; points that each open a bucket (span 1) are transposed by `zip`."""
        pending = self.pending
        if not pending:
            return
        self.pending = []
        span, capacity = self._span, self.capacity
        count, lo, hi = self._count, self._lo, self._hi
        if span == 1 and len(count) + len(pending) <= capacity:  # a bucket a point, no merge
            _, steps, values, times, tokens = zip(*pending, strict=True)  # each column, in C
            self._points += len(values)
            lo += values
            hi += values
            self._last += values
            self._step += steps
            self._tokens += tokens
            self._time += times
            count += [1] * len(values)
            return
        values = list(map(_VALUE, pending))  # the one column every point is read for
        m = len(values)
        self._points += m
        total = sum(values)
        ordered = total - total == 0.0  # no NaN (nor an infinity): `_low_high` may sort
        i = 0
        b = len(count) - 1
        if b >= 0 and count[b] < span:  # the open bucket
            i = min(span - count[b], m)
            if i < _SORT_FROM or not ordered or lo[b] != lo[b] or hi[b] != hi[b]:
                lo[b] = min(lo[b], *values[:i])
                hi[b] = max(hi[b], *values[:i])
            else:
                lo[b], hi[b] = _low_high([lo[b], *values[:i]], [hi[b], *values[:i]])
            count[b] += i
            _, self._step[b], self._last[b], self._time[b], self._tokens[b] = pending[i - 1]
        while i < m:  # every bucket is full here
            room = capacity - len(count)
            if not room:
                self._merge()
                span, room = self._span, capacity - len(self._count)
                count, lo, hi = self._count, self._lo, self._hi
            j = min(m, i + room * span)  # the points that fit before the next merge
            if span == 1:
                lo += values[i:j]
                hi += values[i:j]
                self._last += values[i:j]
                ends = pending[i:j]
                count += [1] * (j - i)
            else:
                if span < _SORT_FROM:  # `min(a, b, ...)` a full bucket, mapped in C
                    full = i + (j - i) // span * span
                    columns = [values[k:full:span] for k in range(i, i + span)]
                    lo += map(min, *columns)
                    hi += map(max, *columns)
                    if full < j:
                        lo.append(min(values[full:j]))
                        hi.append(max(values[full:j]))
                elif not ordered:
                    lo += [min(values[k : k + span]) for k in range(i, j, span)]
                    hi += [max(values[k : k + span]) for k in range(i, j, span)]
                else:
                    for k in range(i, j, span):
                        low, high = _low_high(values[k : k + span], values[k : k + span])
                        lo.append(low)
                        hi.append(high)
                ends = pending[i + span - 1 : j : span]  # each full bucket's last point
                count += [span] * len(ends)
                if (j - i) % span:  # and a last bucket left open
                    ends.append(pending[j - 1])
                    count.append((j - i) % span)
                self._last += map(_VALUE, ends)
            self._step += map(_STEP, ends)
            self._tokens += map(_TOKENS, ends)
            self._time += map(_TIME, ends)
            i = j

    def _merge(self) -> None:
        """Halve the buckets: each pair becomes one (x and last of the later, min and max of
        both: `min(a, b)` and `max(a, b)` mapped in C over the pairs)."""
        lo, hi, count = self._lo, self._hi, self._count
        self._lo = list(map(min, lo[0::2], lo[1::2]))
        self._hi = list(map(max, hi[0::2], hi[1::2]))
        self._count = list(map(add, count[0::2], count[1::2]))
        self._last = self._last[1::2]
        self._step = self._step[1::2]
        self._tokens = self._tokens[1::2]
        self._time = self._time[1::2]
        self._span *= 2
        self._epoch += 1

    def columns(
        self, start: int = 0, flops_per_token: float | None = None
    ) -> dict[str, list[Any]]:
        """Buckets from `start` on, as columns: one x list per axis, then min, max, last."""
        self.settle()
        tokens = self._tokens[start:]
        if flops_per_token is None:
            flops: list[Any] = [None] * len(tokens)
        else:
            flops = [None if t is None else t * flops_per_token for t in tokens]
        return {
            "step": self._step[start:],
            "tokens": tokens,
            "flops": flops,
            "time": self._time[start:],
            "min": self._lo[start:],
            "max": self._hi[start:],
            "last": self._last[start:],
        }

    def describe(self) -> dict[str, Any]:
        self.settle()
        return {
            "name": self.name,
            "group": self.group,
            "unit": self.unit,
            "label": self.label,
            "points": self._points,
            "buckets": len(self._count),
            "span": self._span,
            "epoch": self._epoch,
        }


for _slot, _doc in (
    ("span", "points per full bucket"),
    ("epoch", "merges so far"),
    ("points", "points ever added"),
    ("step", "each bucket's last step"),
    ("tokens", "each bucket's last tokens"),
    ("time", "each bucket's last time"),
    ("lo", "each bucket's minimum"),
    ("hi", "each bucket's maximum"),
    ("last", "each bucket's last value"),
    ("count", "each bucket's points"),
):
    setattr(BoundedSeries, _slot, _stored(f"_{_slot}", _doc))
del _slot, _doc


class SnapshotRows:
    """The system series' points of the snapshots not stored yet: a row a snapshot, (step,
    tokens, time, [a number or None for each of `_NAMES`]), written by the walk (a number only
    for a series that exists: a new one is made and takes its first point at once).

    A snapshot's numbers cost the walk a slot each (no tuple, no call); `store` puts a few
    hundred snapshots' rows in the series together: the rows transposed by `zip`, a column
    without gaps extended onto a series of a point a bucket (its own pending points first),
    others through the series' `pending` and `store`. Shared by the history and its series (a
    reader of a series stores the rows first), so it is one object a checkpoint keeps whole."""

    __slots__ = ("rows", "series")

    def __init__(self, series: dict[str, BoundedSeries]) -> None:
        self.rows: list[tuple[Any, Any, Any, list[Any]]] = []
        self.series = series  # the history's series, by name

    def store(self) -> None:
        rows = self.rows
        if not rows:
            return
        self.rows = []
        steps, tokens, times, values = zip(*rows, strict=True)
        series_of = self.series
        for name, column in zip(_NAMES, zip(*values, strict=True), strict=True):
            gaps = column.count(None)
            if gaps == len(column):
                continue
            series = series_of[name]  # (a number is written only for a series that exists)
            if series.pending:
                series.store()  # its earlier points first
            if not gaps and series._span == 1 and len(series._count) + len(column) <= series.capacity:
                series._points += len(column)  # a bucket a point, no merge: `store`'s first case
                series._lo += column
                series._hi += column
                series._last += column
                series._step += steps
                series._tokens += tokens
                series._time += times
                series._count += [1] * len(column)
            else:
                series.pending += [(None, s, v, t, k) for s, v, t, k in
                                   zip(steps, column, times, tokens, strict=True) if v is not None]
                series.store()


class History:
    """All series of one run, and the cursor (step, tokens, time) new points are placed at."""

    #: the snapshot keys `on_snapshot` reads: a replay's samples need carry no other
    reads = frozenset(
        {"steps", "tokens_seen", "flops_per_token", "time", "comm"} | {d[0] for d in _DRAWN}
    )

    def __init__(self, capacity: int = DEFAULT_CAPACITY, max_series: int = MAX_SERIES) -> None:
        self.capacity = capacity
        self.max_series = max_series
        self.series: dict[str, BoundedSeries] = {}  # (never rebound: `table` holds it)
        self.table = SnapshotRows(self.series)  # the snapshots' numbers not stored yet
        self.dropped_series: set[str] = set()
        self.t0: float | None = None  # the run's start, in record time
        self.step = 0.0
        self.tokens: float | None = None
        self.time: float | None = None
        self.flops_per_token: float | None = None
        self.flops_convention: str | None = None
        self.version = 0  # grows with every point added
        self.unstored = 0  # snapshots since every series' points were stored (`store`)

    # -- feeding ---------------------------------------------------------------------------

    def on_points(self, points: list[tuple[Any, ...]], origin: float | None = None) -> None:
        """The loop's values the engine took (`Engine.take_points`: key, step, value, seconds
        since the run's start, tokens), each a point of its key's series; `origin` is the run's
        start in record time (the clock of the snapshots' `now`). The engine decided which
        rank's values count and at which step: the history only keeps them.

        Each key's points are handed to its series together (`BoundedSeries.pending`, stored a
        few hundred at a time): the keys are read in C, a block of one key (most of a replay's)
        goes whole, a block of a few keys is cut by key in C; series are made in the order
        their keys first come, as one point at a time made them."""
        if origin is not None:
            self.t0 = origin
        n = len(points)
        if not n:
            return
        first = points[0][0]
        if n < 3:  # (its first and last key are all its keys)
            one = points[-1][0] == first
        else:  # the keys compared in C, no list of them made
            one = countOf(map(_KEY, points), first) == n
        if one:  # one key (most of a replay's blocks): the block goes whole
            series = self.series.get(first)
            if series is not None:
                if first in _SYSTEM and self.table.rows:  # a loop key named as a system one
                    self.table.store()  # (the snapshots' points before these)
                pending = series.pending
                pending += points
                self.version += n
                if len(pending) >= PENDING:
                    series.store()
                return
            groups: Any = ((first, points),)
        else:
            keys = list(map(_KEY, points))
            distinct = dict.fromkeys(keys)
            if len(distinct) <= _CUT_BY_KEY:
                groups = ((key, list(compress(points, map(eq, keys, repeat(key)))))
                          for key in distinct)
            else:  # many keys: one pass
                by_key: dict[str, list[tuple[Any, ...]]] = {}
                for point in points:
                    got = by_key.get(point[0])
                    if got is None:
                        by_key[point[0]] = [point]
                    else:
                        got.append(point)
                groups = by_key.items()
        series_of = self.series
        for key, got in groups:
            series = series_of.get(key)
            if series is None:  # a new series (or one past `max_series`, dropped)
                series = self._new(key, "loop", "", "")
                if series is None:
                    continue
            elif key in _SYSTEM and self.table.rows:
                self.table.store()
            pending = series.pending
            pending += got
            self.version += len(got)
            if len(pending) >= PENDING:
                series.store()

    def on_snapshot(self, snap: dict[str, Any], now: float | None = None) -> None:
        """Resync the cursor on the engine's counts and add a point to each system series.

        Each number is read by `snapread.finite`'s rule with its common answers in line (a
        finite float as it is, an int that is exactly a float as one; the rest through
        `finite`), as the written-out walk reads them: a call a number cost more than the rule."""
        get = snap.get
        steps = get("steps")
        if type(steps) is int and -_EXACT <= steps <= _EXACT:
            steps = float(steps)
        elif type(steps) is not float or steps - steps != 0.0:
            steps = _number(steps)
        if steps is not None and steps > self.step:  # `max(self.step, steps)`
            self.step = steps
        tokens = get("tokens_seen")
        if type(tokens) is not float or tokens - tokens != 0.0:
            tokens = _number(tokens)
        if tokens is not None:
            self.tokens = tokens
        fpt = get("flops_per_token")
        if isinstance(fpt, dict):
            value = fpt.get("value")
            self.flops_per_token = value if type(value) is float and value - value == 0.0 else (
                None if value is None else _number(value))
            conv = fpt.get("convention")
            self.flops_convention = conv if isinstance(conv, str) else None
        clock = get("time")  # `get_number(snap, "time.elapsed_s")` without the dotted path
        elapsed = clock.get("elapsed_s") if isinstance(clock, dict) else None
        if elapsed is not None and (type(elapsed) is not float or elapsed - elapsed != 0.0):
            elapsed = _number(elapsed)
        t = now
        if t is not None and (type(t) is not float or t - t != 0.0):
            t = _number(t)
        if t is not None:  # the snapshot's time since the run's start (none before it)
            if self.t0 is None:
                self.t0 = t - elapsed if elapsed is not None else t
            since = t - self.t0
            self.time = since if since > 0.0 else 0.0  # `max(0.0, since)`
        elif elapsed is not None:
            self.time = elapsed
        added = _walk(self, snap, self.step, self.tokens, self.time)  # (adds a new series)
        self.version += added
        self.unstored += 1  # the walk adds a row to `table` (no call a point): bound them
        if self.unstored >= PENDING:
            self.store()
        comm = get("comm")
        if comm is not None:  # (a run of one process has no per-rank split: no call)
            self._ranks(comm)

    def store(self) -> None:
        """Every series' pending points put in its buckets (`BoundedSeries.store`)."""
        self.unstored = 0
        self.table.store()
        for series in self.series.values():
            if series.pending:
                series.store()

    def _ranks(self, comm: Any) -> None:
        """Each rank's compute a step, from the engine's per-rank split (docs/ranks.md): the
        snapshot's `comm`."""
        rows = comm.get("ranks") if isinstance(comm, dict) else None
        if not isinstance(rows, dict):
            return
        ranks = sorted(rows, key=lambda r: (len(str(r)), str(r)))[:RANK_SERIES]
        for rank in ranks:
            row = rows[rank]
            value = _number(row.get("compute_s")) if isinstance(row, dict) else None
            if value is not None:
                self.add(f"{RANK_PREFIX}{rank}", "ranks", value, self.step, self.tokens,
                         self.time, "s", f"rank {rank}")

    def add(
        self,
        name: str,
        group: str,
        value: float,
        step: float | None,
        tokens: float | None,
        time: float | None,
        unit: str = "",
        label: str = "",
    ) -> None:
        series = self.series.get(name)
        if series is None:
            series = self._new(name, group, unit, label)
            if series is None:
                return
        series.add(value, step, tokens, time)
        self.version += 1

    def _new(self, name: str, group: str, unit: str, label: str) -> BoundedSeries | None:
        """A new series, or None past `max_series` (its name kept in `dropped_series`)."""
        if len(self.series) >= self.max_series:
            self.dropped_series.add(name)
            return None
        series = self.series[name] = BoundedSeries(name, group, unit, label, self.capacity)
        series.table = self.table
        return series

    # -- reading ---------------------------------------------------------------------------

    def axes_absent(self) -> dict[str, str]:
        """Axes that cannot be drawn, each with its reason."""
        absent = {}
        if self.flops_per_token is None:
            absent["flops"] = "FLOPs per token are not known yet (no model shape or counted FLOPs)"
        if self.tokens is None:
            absent["tokens"] = "no tokens counted yet"
        return absent

    def dump(self, since: dict[str, tuple[int, int, int]] | None = None) -> dict[str, Any]:
        """Every series as columns; with `since` (from `marks()`), only what is new.

        A series with no new point is left out; one whose epoch moved (its buckets were re-cut)
        is sent whole ("reset": true); otherwise it is sent from its last sent bucket on (that
        one may have taken more points since).
        """
        out: dict[str, Any] = {}
        for name, s in self.series.items():
            start, reset = 0, True
            mark = since.get(name) if since is not None else None
            if mark is not None:
                epoch, sent, points = mark
                if epoch == s.epoch and points == s.points:
                    continue
                if epoch == s.epoch and 0 < sent <= len(s):
                    start, reset = sent - 1, False
            entry = s.describe()
            entry["start"] = start
            entry["reset"] = reset
            entry.update(s.columns(start, self.flops_per_token))
            out[name] = entry
        return {
            "series": out,
            "axes_absent": self.axes_absent(),
            "flops_convention": self.flops_convention,
            "dropped_series": sorted(self.dropped_series),
        }

    def marks(self) -> dict[str, tuple[int, int, int]]:
        """What a reader holds after `dump()`: {name: (epoch, buckets, points)} for `dump(since)`."""
        return {name: (s.epoch, len(s), s.points) for name, s in self.series.items()}


def _write_walk() -> None:
    """Writes `views/history_walk.py` from the tables (`_walk_source`)."""
    import os  # here: the history is pure, only this maintainers' command writes a file

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "history_walk.py")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(_walk_source(_DRAWN_BY_KEY))


if __name__ == "__main__":
    _write_walk()
