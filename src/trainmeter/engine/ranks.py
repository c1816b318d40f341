"""Per-rank seconds per step, to find the rank that holds the others back.

Each rank's step records arrive on their own clock; a rank's step time is the wall time of a
window of its records over the steps in it (engine/rate.py): the trailing window while the run
goes on, the steady state once it has ended, warm-up left out, never a mean of intervals.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from .rate import FOLD_EVERY, RateWindow


class RankTimes:
    """Each rank's step records, kept raw and folded into the rank's window when a step time
    is read (a snapshot) or when `FOLD_EVERY` wait: the same windows, without a window's work
    on every record of a replay (`RateWindow.add_many`).

    The clock rank's window is the step clock's own (`clock`, engine/throughput.py) while the
    clock has taken every step record of that rank and no other's: its step times are the same
    numbers (a window's times and steps; its tokens are not read here), so the engine does not
    keep that rank's records twice (it passes `step` the other ranks' alone). A hello that moves the clock to another rank
    ends it (`clock_moved`): the old clock rank's window is copied from the clock's, and from
    then on every rank's records are kept here."""

    def __init__(self, clock: Any = None, clock_rank: int = 0) -> None:
        self._windows: dict[int, RateWindow] = {}
        self._raw: dict[int, list[tuple[float, int, float, float]]] = {}
        #: the step clock whose window is `clock_rank`'s, or None: every rank's kept here
        self.clock = clock
        self.clock_rank = clock_rank

    def clock_moved(self, old: int, new: int) -> None:
        """The node's clock rank moved from `old` to `new` (a hello)."""
        clock = self.clock
        if clock is None or old == new:
            return
        if clock.records:  # the clock's window is `old`'s records: that rank's own window
            window = RateWindow(detail=False)
            mirrored = clock.window
            window.records, window.last = mirrored.records, mirrored.last
            window.head = list(mirrored.head)
            window.head_intervals = list(mirrored.head_intervals)
            window.recent = deque(mirrored.recent)
            self._windows[old] = window
            self._raw[old] = []
            self.clock = None  # the clock now takes another rank's records after old's
        elif new in self._raw:
            self.clock = None  # `new` has records of its own here, the clock none
        else:
            self.clock_rank = new

    def step(self, rank: int, t: float, k: int) -> None:
        raw = self._raw.get(rank)
        if raw is None:
            self._windows[rank] = RateWindow(detail=False)
            raw = self._raw[rank] = []
        raw.append((t, k, 0.0, 0.0))
        if len(raw) >= FOLD_EVERY:
            self._fold(rank)

    def _fold(self, rank: int) -> None:
        raw = self._raw[rank]
        if raw:
            self._raw[rank] = []
            self._windows[rank].add_many(raw)

    def _window(self, rank: int) -> RateWindow | None:
        clock = self.clock
        if clock is not None and rank == self.clock_rank:
            return clock.window if clock.records else None
        window = self._windows.get(rank)
        if window is not None:
            self._fold(rank)
        return window

    def step_time(self, rank: int, finished: bool = False) -> float | None:
        window = self._window(rank)
        if window is None:
            return None
        span = window.steady() if finished else window.trailing()
        return None if span is None else span.step_time()

    def snapshot(self, finished: bool = False) -> dict[str, Any] | None:
        """{step_time_s: {rank: s}, slowest, fastest, spread} with two or more ranks timed.

        spread = slowest / fastest - 1 (0.25: the slowest rank takes 25% longer a step).
        """
        ranks = list(self._windows)
        if self.clock is not None and self.clock.records:
            ranks.append(self.clock_rank)
        times = {r: self.step_time(r, finished) for r in ranks}
        times = {r: v for r, v in times.items() if v}
        if len(times) < 2:
            return None
        slowest = max(times, key=lambda r: (times[r], -r))
        fastest = min(times, key=lambda r: (times[r], r))
        return {
            "step_time_s": {str(r): v for r, v in sorted(times.items())},
            "slowest": str(slowest),
            "fastest": str(fastest),
            "spread": times[slowest] / times[fastest] - 1.0,
        }


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


class RankModel:
    """Which ranks are this node's, which of them clocks the node's steps, where the node sits.

    One `tm` watches one node: every rank that reports to it is one of the node's ranks (its
    global `rank` on the record, its `local_rank` in `hello`). The node's step clock is its
    local rank 0; on node 0 that is also global rank 0, the job's clock. Until a hello names a
    local rank 0, the lowest rank that said hello is the clock (a launcher without LOCAL_RANK),
    and with no hello at all rank 0 (records without a rank are rank 0). docs/ranks.md.
    """

    def __init__(self) -> None:
        self.local: dict[int, int | None] = {}  # global rank -> local rank, from hellos
        self.world_size = 1
        self.local_world_size: int | None = None
        self.node_rank: int | None = None
        self.nodes: int | None = None
        self.run_id: str | None = None
        self._local_zero: int | None = None
        #: the node's step clock (`_clock_rank`), kept as a plain attribute: every step and
        #: phase record asks (`is_clock`), and only a hello changes it
        self.clock_rank = 0
        self.declared: dict[str, Any] = {}  # what `tm` recorded in run.start (flag, argv, env)

    def _clock_rank(self) -> int:
        if self._local_zero is not None:
            return self._local_zero
        return min(self.local) if self.local else 0

    def is_clock(self, rank: Any) -> bool:
        return (rank or 0) == self.clock_rank

    def hello(self, rank: Any, d: dict[str, Any]) -> None:
        r = _int(rank)
        local = _int(d.get("local_rank"))
        if r is not None:  # a process without a rank (the launcher itself) holds no rank
            self.local[r] = local if local is not None else self.local.get(r)
            if local == 0 and (self._local_zero is None or r < self._local_zero):
                self._local_zero = r
            self.clock_rank = self._clock_rank()
        ws = _int(d.get("world_size"))
        if ws and ws > self.world_size:
            self.world_size = ws
        lws = _int(d.get("local_world_size"))
        if lws:
            self.local_world_size = lws
        for key in ("node_rank", "nodes"):
            value = _int(d.get(key))
            if value is not None:
                setattr(self, key, value)
        run_id = d.get("run_id")
        if isinstance(run_id, str) and run_id and self.run_id is None:
            self.run_id = run_id

    def start(self, d: dict[str, Any]) -> None:
        """`run.start`: the run id and node `tm` knew before any rank said hello."""
        job = d.get("job")
        if isinstance(job, dict):
            self.declared = dict(job)
            run_id = job.get("run_id")
            if isinstance(run_id, str) and run_id:
                self.run_id = run_id  # the flag or the scheduler's id wins over a rank's env

    def node_share(self) -> float:
        """The fraction of the job's ranks on this node: 1 on a single node, and 1 when no rank
        said how many ranks its node holds (a launcher without LOCAL_WORLD_SIZE)."""
        lws = self.local_world_size
        return lws / self.world_size if lws and self.world_size > lws else 1.0

    def snapshot(self) -> dict[str, Any]:
        """{run_id, node_rank, nodes, world_size, local_world_size, ranks, clock_rank, ...}."""
        node_rank = self.node_rank
        if node_rank is None:
            node_rank = _int(self.declared.get("node_rank"))
        nodes = self.nodes or _int(self.declared.get("nodes"))
        if not nodes:
            lws = self.local_world_size or self.world_size
            nodes = max(-(-self.world_size // lws), 1)
        out: dict[str, Any] = {
            "run_id": self.run_id,
            "run_id_source": self.declared.get("run_id_source")
            if self.declared.get("run_id")
            else ("launcher" if self.run_id else None),
            "node_rank": node_rank if node_rank is not None else 0,
            "nodes": nodes,
            "world_size": self.world_size,
            "local_world_size": self.local_world_size or self.world_size,
            "ranks": sorted(self.local) or [0],
            "clock_rank": self.clock_rank,
            "job_clock": self.clock_rank == 0,
        }
        return out
