"""Each rank's step split into compute and waiting for the others; the rank they wait for.

In a synchronous job every rank's step lasts as long as the slowest rank's, so step times cannot
tell the ranks apart. Each rank's `comm` records say how long it was held in collectives over
its steps (`agent/probes/collectives.py`); what is left of its step is its compute (everything
the rank does by itself: forward, backward, optimizer, data). The slow rank waits least.

Step-aligned blocks. The ranks of a synchronous job take step n together, so their records are
compared over the same steps, not the same seconds (which also needs no clock agreement between
nodes). Each rank's cumulative (step, time, wait) points are sampled, by linear interpolation,
at every multiple of `grid` steps; block j is the steps from j x grid to (j+1) x grid. The grid
is a power of two chosen from the first measured step time so that a block lasts at least
`BLOCK_S` and `BLOCK_MIN_STEPS` steps (a job's nodes see the same step time, so they choose the
same grid; a merge coarsens to the larger one). In each block, for each rank r:

    compute_r = (block seconds_r - block wait_r) / grid
    excess_r  = compute_r - median(compute of the other ranks)

The rule (stated in `rule()` and docs/ranks.md): a rank is named when its excess is over
`SHARE` of the block's step time (the median over ranks) and over `MIN_EXCESS_S` and, when
there are two other ranks or more, over `OUTLIER` times their spread (on a loaded machine every
rank's compute moves; a slow rank stands apart from the others), in `PERSIST` blocks in a row;
it stays named until `PERSIST` blocks in a row show it under half that. Since when: the first step of the first of those blocks. Its cost: its mean excess over
the blocks it was named in, as a share of the mean step time: the others wait that long each
step, so the job would be that much faster without it. When several nodes are joined
(`merged`), a node whose fastest rank computes longer than the other nodes' by the same rule is
named instead of one of its ranks: a slow node.

Memory is bounded: past `MAX_SAMPLES` samples on a rank the grid doubles (every other sample
kept), and episodes beyond `MAX_EPISODES` drop the oldest.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

#: A block lasts at least this long ...
BLOCK_S = 0.2
#: ... and at least this many steps.
BLOCK_MIN_STEPS = 4
#: A rank is slow in a block when its compute exceeds the others' median by this share of the
#: block's step time ...
SHARE = 0.10
#: ... and by this many seconds (timer noise on a fast loop).
MIN_EXCESS_S = 0.0005
#: Blocks in a row over the threshold to name it; under half of it to stop naming it.
PERSIST = 3
#: With two other ranks or more, the excess must also be this many times their own spread
#: (the largest minus the smallest of their compute in the block).
OUTLIER = 3.0
#: Samples a rank keeps before the grid doubles.
MAX_SAMPLES = 8192
#: Blocks the live per-rank split is over (the whole run once it has ended).
TRAILING_BLOCKS = 16
MAX_EPISODES = 20


def rule() -> str:
    return (
        f"a rank is named when its compute per step exceeds the median of the other ranks' by "
        f"over {SHARE:.0%} of the step time (and {MIN_EXCESS_S * 1000:g} ms) in {PERSIST} "
        f"blocks of steps in a row (each at least {BLOCK_S:g} s and {BLOCK_MIN_STEPS} steps), "
        f"with two other ranks or more by over {OUTLIER:g} times how far apart they are among "
        f"themselves, and no longer once {PERSIST} blocks in a row show it under half of that"
    )


def _median(values: list[float]) -> float:
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2.0


class RankWaits:
    """One rank's cumulative points and its samples at the grid's boundaries."""

    __slots__ = (
        "first_n", "n", "t", "w", "base", "ts", "ws", "steps", "wait_s", "spans_s", "calls",
        "timed",
    )

    def __init__(self) -> None:
        self.first_n: int | None = None
        self.n = 0  # the last point: step index, time, cumulative wait
        self.t = 0.0
        self.w = 0.0
        self.base: int | None = None  # boundary index of ts[0]
        self.ts: list[float] = []
        self.ws: list[float] = []
        self.steps = 0  # every step the records covered
        self.wait_s = 0.0
        self.spans_s = 0.0
        self.calls = 0
        self.timed: set[str] = set()

    def sample(self, i: int) -> tuple[float, float] | None:
        if self.base is None:
            return None
        k = i - self.base
        return (self.ts[k], self.ws[k]) if 0 <= k < len(self.ts) else None

    def coarsen(self) -> None:
        """Keep the samples at even boundary indices (the grid doubles)."""
        if self.base is None:
            return
        skip = self.base % 2
        self.ts, self.ws = self.ts[skip::2], self.ws[skip::2]
        self.base = (self.base + skip) // 2 if self.ts else None

    def copy(self) -> RankWaits:
        out = RankWaits()
        for name in self.__slots__:
            value = getattr(self, name)
            setattr(out, name, list(value) if isinstance(value, list) else
                    set(value) if isinstance(value, set) else value)
        return out


class Episode:
    """A subject (a rank, or a node) named slow over consecutive blocks."""

    __slots__ = ("kind", "who", "ranks", "since_block", "last_block", "blocks", "excess_s",
                 "step_s", "others", "quiet", "grid")

    def __init__(self, kind: str, who: int, ranks: list[int], since: int, grid: int) -> None:
        self.kind, self.who, self.ranks = kind, who, ranks
        self.since_block = self.last_block = since
        self.blocks = 0
        self.excess_s = 0.0  # summed over the blocks it was named in
        self.step_s = 0.0
        self.others = 0
        self.quiet = 0
        self.grid = grid

    def add(self, block: int, excess: float, step: float, others: int) -> None:
        self.blocks += 1
        self.excess_s += excess
        self.step_s += step
        self.last_block = block
        self.others = others
        self.quiet = 0

    def entry(self, active: bool) -> dict[str, Any]:
        extra = self.excess_s / self.blocks
        step = self.step_s / self.blocks
        out: dict[str, Any] = {
            "kind": self.kind,
            self.kind: self.who,
            "ranks": list(self.ranks),
            "extra_s": extra,
            "step_time_s": step,
            "extra_share": extra / step if step > 0 else None,
            "others": self.others,
            "since_step": self.since_block * self.grid + 1,
            "until_step": (self.last_block + 1) * self.grid,
            "steps": self.blocks * self.grid,
            "active": active,
        }
        return out


class Stragglers:
    """Fed each rank's `comm` records; says each rank's compute and wait per step and names
    the rank (or node) the others wait for. Pure: a function of the records fed."""

    def __init__(self) -> None:
        self.ranks: dict[int, RankWaits] = {}
        self.grid: int | None = None
        self.next_block: int | None = None
        self.node_of: dict[int, int] = {}  # rank -> node, when nodes are joined
        self.blocks = 0
        self.whole: dict[int, list[float]] = {}  # rank -> [seconds, wait, steps], all blocks
        self.trailing: deque[dict[int, tuple[float, float, int]]] = deque(maxlen=TRAILING_BLOCKS)
        self.cand: tuple[str, int] | None = None
        self.cand_run: list[tuple[int, float, float, int]] = []  # (block, excess, step, others)
        self.active: Episode | None = None
        self.episodes: deque[Episode] = deque(maxlen=MAX_EPISODES)

    # ---- input ----------------------------------------------------------------------------

    def add(self, rank: int, d: dict[str, Any], t: float) -> None:
        n, k, s = d.get("n"), d.get("k"), d.get("s")
        if type(n) is not int or type(k) is not int or k < 1 or n < k:
            return
        s = float(s) if isinstance(s, (int, float)) and not isinstance(s, bool) and s >= 0 else 0.0
        r = self.ranks.get(rank)
        if r is None:
            r = self.ranks[rank] = RankWaits()
        r.steps += k
        r.wait_s += s
        spans = d.get("spans_s")
        if isinstance(spans, (int, float)) and not isinstance(spans, bool) and 0 <= spans <= s:
            r.spans_s += spans
        calls = d.get("calls")
        if type(calls) is int and calls >= 0:
            r.calls += calls
        timed = d.get("timed")
        if isinstance(timed, str) and timed in ("host", "device"):
            r.timed.add(timed)
        if r.first_n is None:
            r.first_n, r.n, r.t, r.w = n, n, t, s
            if self.grid is not None and n % self.grid == 0:
                r.base, r.ts, r.ws = n // self.grid, [t], [s]
            return
        if n <= r.n or t < r.t:
            return  # out of order: its wait is in the totals, not in the blocks
        if self.grid is None:
            step = (t - r.t) / (n - r.n)
            if step <= 0:
                r.n, r.t, r.w = n, t, r.w + s
                return
            want = max(BLOCK_MIN_STEPS, math.ceil(BLOCK_S / step))
            self.grid = 1 << max(want - 1, 0).bit_length()
        grid = self.grid
        b = (r.n // grid + 1) * grid
        while b <= n:
            f = (b - r.n) / (n - r.n)
            if r.base is None:
                r.base = b // grid
            r.ts.append(r.t + f * (t - r.t))
            r.ws.append(r.w + f * s)
            b += grid
        r.n, r.t, r.w = n, t, r.w + s
        if len(r.ts) > MAX_SAMPLES:
            self._coarsen()
        self._evaluate(finished=False)

    def _coarsen(self) -> None:
        assert self.grid is not None
        self.grid *= 2
        for r in self.ranks.values():
            r.coarsen()
        if self.next_block is not None:
            self.next_block = -(-self.next_block // 2)
        if self.active is not None:
            self.active.grid = self.grid  # its blocks so far keep their step span (approx.)
            self.active.since_block //= 2
            self.active.last_block //= 2
        self.cand, self.cand_run = None, []

    # ---- blocks ---------------------------------------------------------------------------

    def _evaluate(self, finished: bool) -> None:
        grid = self.grid
        if grid is None:
            return
        ranks = self.ranks
        if self.next_block is None:
            bases = [r.base for r in ranks.values() if r.base is not None]
            if not bases:
                return
            self.next_block = min(bases)
        while True:
            j = self.next_block
            start, end = j * grid, (j + 1) * grid
            ready = True
            any_later = False
            for r in ranks.values():
                if r.first_n is not None and r.first_n <= start and r.n < end:
                    ready = False  # this rank may still cover the block
                if r.n >= end:
                    any_later = True
            if not any_later or (not ready and not finished):
                return
            rows: dict[int, tuple[float, float]] = {}
            for rank, r in ranks.items():
                a, b = r.sample(j), r.sample(j + 1)
                if a is not None and b is not None:
                    rows[rank] = (b[0] - a[0], b[1] - a[1])
            self.next_block = j + 1
            if len(rows) >= 2:
                self._block(j, rows, grid)

    def _block(self, j: int, rows: dict[int, tuple[float, float]], grid: int) -> None:
        self.blocks += 1
        self.trailing.append({r: (dt, dw, grid) for r, (dt, dw) in rows.items()})
        for r, (dt, dw) in rows.items():
            acc = self.whole.setdefault(r, [0.0, 0.0, 0])
            acc[0] += dt
            acc[1] += dw
            acc[2] += grid
        compute = {r: (dt - dw) / grid for r, (dt, dw) in rows.items()}
        step = _median([dt / grid for dt, _ in rows.values()])
        threshold = max(SHARE * step, MIN_EXCESS_S)
        excess: dict[tuple[str, int], float] = {}
        spread: dict[tuple[str, int], float] = {}  # how far apart the others are among them
        for r, c in compute.items():
            others = [v for q, v in compute.items() if q != r]
            excess[("rank", r)] = c - _median(others)
            if len(others) >= 2:
                spread[("rank", r)] = max(others) - min(others)
        members: dict[tuple[str, int], list[int]] = {("rank", r): [r] for r in compute}
        nodes: dict[int, list[int]] = {}
        for r in compute:
            if r in self.node_of:
                nodes.setdefault(self.node_of[r], []).append(r)
        if len(nodes) >= 2:
            node_c = {k: min(compute[r] for r in rs) for k, rs in nodes.items()}
            for k, rs in nodes.items():
                if len(rs) >= 2:
                    others = [v for q, v in node_c.items() if q != k]
                    excess[("node", k)] = node_c[k] - _median(others)
                    if len(others) >= 2:
                        spread[("node", k)] = max(others) - min(others)
                    members[("node", k)] = sorted(rs)
        n_ranks = len(compute)
        active = self.active
        if active is not None:
            ex = excess.get((active.kind, active.who))
            if ex is not None and ex >= threshold / 2:
                active.add(j, ex, step, n_ranks - len(active.ranks))
            else:
                active.quiet += 1
                if active.quiet >= PERSIST:
                    self.active = None
            return
        # slow: over the threshold, and (with two others or more) an outlier among them: further
        # from their median than OUTLIER times their own spread (on a loaded machine every rank
        # moves; a slow one stands apart)
        slow = [key for key, ex in excess.items()
                if ex > threshold and ex > OUTLIER * spread.get(key, 0.0)]
        if not slow:
            self.cand, self.cand_run = None, []
            return
        # a slow node wins over its ranks; else the rank with the largest excess
        top = max(slow, key=lambda key: (key[0] == "node", excess[key], -key[1]))
        if top != self.cand:
            self.cand, self.cand_run = top, []
        self.cand_run.append((j, excess[top], step, n_ranks - len(members[top])))
        if len(self.cand_run) >= PERSIST:
            kind, who = top
            episode = Episode(kind, who, members[top], self.cand_run[0][0], grid)
            for block, ex, st, others in self.cand_run:
                episode.add(block, ex, st, others)
            self.active = episode
            self.episodes.append(episode)
            self.cand, self.cand_run = None, []

    # ---- output ---------------------------------------------------------------------------

    def finish(self) -> None:
        """The run has ended: evaluate the blocks every rank that got there covers."""
        self._evaluate(finished=True)

    def snapshot(self, finished: bool, world_size: int, clock_rank: int) -> tuple[
        dict[str, Any] | None, dict[str, Any] | None, dict[str, str]
    ]:
        """(comm, straggler, absent reasons)."""
        absent: dict[str, str] = {}
        if not self.ranks:
            if world_size > 1:
                absent["comm"] = absent["straggler"] = (
                    "no rank reported its waits in collectives (the collectives probe times "
                    "torch.distributed waits and DDP's; it did not see one)"
                )
            return None, None, absent
        if finished:
            self.finish()
        rows: dict[str, dict[str, Any]] = {}
        window = self._window(finished)
        for rank, r in sorted(self.ranks.items()):
            row: dict[str, Any] = {
                "wait_total_s": r.wait_s,
                "spans_s": r.spans_s,
                "steps": r.steps,
                "calls": r.calls,
            }
            got = window.get(rank)
            if got is not None:
                seconds, wait, steps = got
                row["step_s"] = seconds / steps
                row["wait_s"] = wait / steps
                row["compute_s"] = (seconds - wait) / steps
                row["wait_share"] = wait / seconds if seconds > 0 else None
            rows[str(rank)] = row
        timed = sorted({x for r in self.ranks.values() for x in r.timed})
        comm: dict[str, Any] = {
            "ranks": rows,
            "window": {
                "kind": "whole" if finished else "trailing",
                "blocks": self.blocks if finished else len(self.trailing),
                "block_steps": self.grid,
            },
            "timed": " and ".join(timed) if timed else None,
            "rule": rule(),
            "episodes": [e.entry(e is self.active) for e in self.episodes],
        }
        straggler = self.active.entry(True) if self.active is not None else None
        if straggler is None and len(self.ranks) >= 2 and self.blocks < PERSIST:
            absent["straggler"] = (
                f"needs {PERSIST} blocks of {self.grid or BLOCK_MIN_STEPS}+ steps from two ranks "
                f"or more ({self.blocks} so far)"
            )
        elif len(self.ranks) < 2:
            absent["straggler"] = f"only rank {next(iter(self.ranks))} reported its waits"
        return comm, straggler, absent

    def _window(self, finished: bool) -> dict[int, tuple[float, float, int]]:
        """rank -> (seconds, wait, steps) over the blocks the per-rank split covers."""
        if finished:
            return {r: (a[0], a[1], int(a[2])) for r, a in self.whole.items() if a[2]}
        out: dict[int, list[float]] = {}
        for block in self.trailing:
            for r, (dt, dw, grid) in block.items():
                acc = out.setdefault(r, [0.0, 0.0, 0])
                acc[0] += dt
                acc[1] += dw
                acc[2] += grid
        return {r: (a[0], a[1], int(a[2])) for r, a in out.items() if a[2]}

    # ---- several nodes --------------------------------------------------------------------

    @classmethod
    def merged(cls, parts: list[Stragglers], node_of: dict[int, int]) -> Stragglers:
        """One job's detector from its nodes' (each fed its own ranks), evaluated anew with
        the nodes known, so a slow node is named as such."""
        out = cls()
        grids = [p.grid for p in parts if p.grid is not None]
        out.node_of = dict(node_of)
        for p in parts:
            for rank, r in p.ranks.items():
                out.ranks[rank] = r.copy()
        if not grids:
            return out
        out.grid = max(grids)
        for p in parts:
            g = p.grid or out.grid
            while g < out.grid:
                for rank in p.ranks:
                    out.ranks[rank].coarsen()
                g *= 2
        out.finish()
        return out
