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

from typing import Any

from ..snapread import finite as _number
from .history_walk import walk as _walk

#: The x axes a series can be drawn against.
AXES = ("step", "tokens", "flops", "time")

#: Buckets per series. 2048 points is more than a chart's width in pixels.
DEFAULT_CAPACITY = 2048

#: Integers up to this size are exactly floats (a larger one goes through `snapread.finite`).
_EXACT = 2**53

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


def _walk_source(
    runs: tuple[tuple[str, tuple[tuple[str, tuple[str, ...], Any, bool, str, str], ...]], ...],
) -> str:
    """`History.on_snapshot`'s walk of the tables, written out as one function of straight code
    (`walk(history, snap, step, tokens, time)` -> the points added to series that existed):
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
    out = [_WALK_HEADER, "def walk(self, snap, step, tokens, time):",
           "    series_of = self.series", "    get = snap.get", "    added = 0"]

    def number(node: str, indent: str, then: list[str]) -> list[str]:
        """`value` from `node` by the number rule; `then` runs when it is one."""
        return [
            f"{indent}kind = type({node})",
            f"{indent}if kind is float:",
            f"{indent}    value = {node} if {node} - {node} == 0.0 else None",
            f"{indent}elif kind is int and -_EXACT <= {node} <= _EXACT:",
            f"{indent}    value = float({node})",
            f"{indent}else:",
            f"{indent}    value = _number({node})",
            f"{indent}if value is not None:",
            *then,
        ]

    def add(name: str, complement: bool, unit: str, label: str, indent: str) -> list[str]:
        return [
            *([f"{indent}value = 1.0 - value"] if complement else []),
            f"{indent}series = series_of.get({name!r})",
            f"{indent}if series is None:",
            f"{indent}    self.add({name!r}, 'system', value, step, tokens, time, {unit!r}, "
            f"{label!r})",
            f"{indent}else:",
            f"{indent}    series.add(value, step, tokens, time)",
            f"{indent}    added += 1",
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
    out.append("    return added")
    return "\n".join(out) + "\n"


#: The written-out walk's module, before its function.
_WALK_HEADER = f'''"""`History.on_snapshot`'s walk of the snapshot tables, written out by `views/history.py`
(`_walk_source`) from its `SNAPSHOT_SERIES` and `SNAPSHOT_COMPLEMENTS`. Do not edit: after a
change to the tables, `python -m trainmeter.views.history` writes it again."""

from ..snapread import finite as _number

_EXACT = {_EXACT!r}  # integers up to this size are exactly floats

'''


class BoundedSeries:
    """One series: at most `capacity` buckets of (min, max, last) at the last point's x.

    `epoch` grows at each merge, so a reader that sent the first n buckets can tell whether
    they still stand (same epoch: only bucket n-1 may have changed since) or were re-cut.
    """

    __slots__ = (
        "name",
        "group",
        "unit",
        "label",
        "capacity",
        "span",
        "epoch",
        "points",
        "step",
        "tokens",
        "time",
        "lo",
        "hi",
        "last",
        "count",
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
        self.span = 1  # points per full bucket
        self.epoch = 0
        self.points = 0  # points ever added
        self.step: list[float | None] = []
        self.tokens: list[float | None] = []
        self.time: list[float | None] = []
        self.lo: list[float] = []
        self.hi: list[float] = []
        self.last: list[float] = []
        self.count: list[int] = []

    def __len__(self) -> int:
        return len(self.last)

    def add(
        self, value: float, step: float | None, tokens: float | None, time: float | None
    ) -> None:
        """One point; the caller gives points in run order."""
        self.points += 1
        count = self.count
        n = len(count)
        if n:
            i = n - 1
            if count[i] < self.span:
                lo, hi = self.lo, self.hi
                if value < lo[i]:
                    lo[i] = value
                if value > hi[i]:
                    hi[i] = value
                self.last[i] = value
                count[i] += 1
                self.step[i], self.tokens[i], self.time[i] = step, tokens, time
                return
            if n >= self.capacity:
                # every bucket is full here (one opens only when the one before is), so each
                # merged pair is full too and the point opens a new bucket
                self._merge()
                count = self.count
        self.step.append(step)
        self.tokens.append(tokens)
        self.time.append(time)
        self.lo.append(value)
        self.hi.append(value)
        self.last.append(value)
        count.append(1)

    def add_run(self, points: list[tuple[Any, ...]], i: int) -> int:
        """`add` for each of `points` from `i` on while their key is `points[i]`'s (the
        engine's point tuples: key, step, value, time, tokens); returns the index after them.

        The same steps as `add`, with the bucket lists held in locals across the run: a block
        of the loop's values (most of them one series, most filling a bucket already open)
        costs one call rather than one a point."""
        key = points[i][0]
        n = len(points)
        span, capacity = self.span, self.capacity
        count, lo, hi, last = self.count, self.lo, self.hi, self.last
        steps, tokens_of, times = self.step, self.tokens, self.time
        j = i
        while j < n:
            name, step, value, time, tokens = points[j]
            if name != key:
                break
            j += 1
            b = len(count) - 1
            if b >= 0 and count[b] < span:
                if value < lo[b]:
                    lo[b] = value
                if value > hi[b]:
                    hi[b] = value
                last[b] = value
                count[b] += 1
                steps[b], tokens_of[b], times[b] = step, tokens, time
                continue
            if b + 1 >= capacity:  # all full: as in `add`, the point opens a bucket after
                self._merge()
                span = self.span
                count, lo, hi, last = self.count, self.lo, self.hi, self.last
                steps, tokens_of, times = self.step, self.tokens, self.time
            steps.append(step)
            tokens_of.append(tokens)
            times.append(time)
            lo.append(value)
            hi.append(value)
            last.append(value)
            count.append(1)
        self.points += j - i
        return j

    def _merge(self) -> None:
        """Halve the buckets: each pair becomes one (x and last of the later, min and max of both)."""

        def later(xs: list[Any]) -> list[Any]:
            return xs[1::2]

        self.lo = [min(a, b) for a, b in zip(self.lo[0::2], self.lo[1::2], strict=True)]
        self.hi = [max(a, b) for a, b in zip(self.hi[0::2], self.hi[1::2], strict=True)]
        self.count = [a + b for a, b in zip(self.count[0::2], self.count[1::2], strict=True)]
        self.last = later(self.last)
        self.step = later(self.step)
        self.tokens = later(self.tokens)
        self.time = later(self.time)
        self.span *= 2
        self.epoch += 1

    def columns(
        self, start: int = 0, flops_per_token: float | None = None
    ) -> dict[str, list[Any]]:
        """Buckets from `start` on, as columns: one x list per axis, then min, max, last."""
        tokens = self.tokens[start:]
        if flops_per_token is None:
            flops: list[Any] = [None] * len(tokens)
        else:
            flops = [None if t is None else t * flops_per_token for t in tokens]
        return {
            "step": self.step[start:],
            "tokens": tokens,
            "flops": flops,
            "time": self.time[start:],
            "min": self.lo[start:],
            "max": self.hi[start:],
            "last": self.last[start:],
        }

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "group": self.group,
            "unit": self.unit,
            "label": self.label,
            "points": self.points,
            "buckets": len(self),
            "span": self.span,
            "epoch": self.epoch,
        }


class History:
    """All series of one run, and the cursor (step, tokens, time) new points are placed at."""

    #: the snapshot keys `on_snapshot` reads: a replay's samples need carry no other
    reads = frozenset(
        {"steps", "tokens_seen", "flops_per_token", "time", "comm"} | {d[0] for d in _DRAWN}
    )

    def __init__(self, capacity: int = DEFAULT_CAPACITY, max_series: int = MAX_SERIES) -> None:
        self.capacity = capacity
        self.max_series = max_series
        self.series: dict[str, BoundedSeries] = {}
        self.dropped_series: set[str] = set()
        self.t0: float | None = None  # the run's start, in record time
        self.step = 0.0
        self.tokens: float | None = None
        self.time: float | None = None
        self.flops_per_token: float | None = None
        self.flops_convention: str | None = None
        self.version = 0  # grows with every point added

    # -- feeding ---------------------------------------------------------------------------

    def _clock(self, t: Any) -> float | None:
        t = _number(t)
        if t is None:
            return self.time
        if self.t0 is None:
            self.t0 = t
        return max(0.0, t - self.t0)

    def on_points(self, points: list[tuple[Any, ...]], origin: float | None = None) -> None:
        """The loop's values the engine took (`Engine.take_points`: key, step, value, seconds
        since the run's start, tokens), each a point of its key's series; `origin` is the run's
        start in record time (the clock of the snapshots' `now`). The engine decided which
        rank's values count and at which step: the history only keeps them."""
        if origin is not None:
            self.t0 = origin
        series_of = self.series
        i, n = 0, len(points)
        while i < n:
            key, step, value, time, tokens = points[i]
            series = series_of.get(key)
            if series is None:  # a new series (or one past `max_series`, dropped)
                self.add(key, "loop", value, step, tokens, time)
                i += 1
            else:  # the run of points of this key that starts here
                j = series.add_run(points, i)
                self.version += j - i
                i = j

    def on_snapshot(self, snap: dict[str, Any], now: float | None = None) -> None:
        """Resync the cursor on the engine's counts and add a point to each system series."""
        steps = _number(snap.get("steps"))
        tokens = _number(snap.get("tokens_seen"))
        if steps is not None:
            self.step = max(self.step, steps)
        if tokens is not None:
            self.tokens = tokens
        fpt = snap.get("flops_per_token")
        if isinstance(fpt, dict):
            self.flops_per_token = _number(fpt.get("value"))
            conv = fpt.get("convention")
            self.flops_convention = conv if isinstance(conv, str) else None
        clock = snap.get("time")  # `get_number(snap, "time.elapsed_s")` without the dotted path
        elapsed = _number(clock.get("elapsed_s")) if isinstance(clock, dict) else None
        if now is not None and _number(now) is not None:
            if self.t0 is None and elapsed is not None:
                self.t0 = float(now) - elapsed
            self.time = self._clock(now)
        elif elapsed is not None:
            self.time = elapsed
        added = _walk(self, snap, self.step, self.tokens, self.time)  # (adds a new series)
        self.version += added
        self._ranks(snap)

    def _ranks(self, snap: dict[str, Any]) -> None:
        """Each rank's compute a step, from the engine's per-rank split (docs/ranks.md)."""
        comm = snap.get("comm")
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
            if len(self.series) >= self.max_series:
                self.dropped_series.add(name)
                return
            series = self.series[name] = BoundedSeries(name, group, unit, label, self.capacity)
        series.add(value, step, tokens, time)
        self.version += 1

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
