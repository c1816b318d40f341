"""A rate window folded from a batch of raw step records (`RateWindow.add_many`) is the window
fed one record at a time (`add`): the same sums, the same windows, the same spread.

The engine keeps the step records it gets and folds them only when a window is read (a
sample, a snapshot) or when enough wait, so every number a snapshot shows must be the one the
record-at-a-time window gives, whatever the batches. Random runs cover what a loop does:
irregular and repeated times, records out of order, aggregated records of k steps, more
intervals than the exact store holds, pauses longer than the trailing window.
"""

from __future__ import annotations

import random

import pytest

from trainmeter.engine import Engine
from trainmeter.engine.formulas import MovingAverage
from trainmeter.engine.rate import EXACT_DURATIONS, FOLD_EVERY, RateWindow, Window
from trainmeter.engine.throughput import ALPHA, StepClock

from .build import rec


def _records(rng: random.Random, n: int) -> list[tuple[float, int, float, float]]:
    t = rng.uniform(0.0, 100.0)
    out = []
    for _ in range(n):
        roll = rng.random()
        if roll < 0.02:
            t -= rng.uniform(0.0, 0.5)  # out of order: counted at the latest time
        elif roll < 0.05:
            pass  # the same time again
        elif roll < 0.052:
            t += rng.uniform(30.0, 90.0)  # a stall longer than the trailing window
        else:
            t += rng.choice([0.01, 0.1, 0.3, rng.uniform(0.0, 0.6)])
        k = rng.choice([1, 1, 1, 2, 8])
        tokens = rng.choice([0.0, 512.0, rng.uniform(0.0, 9e3)])
        out.append((t, k, tokens, tokens * rng.choice([1.0, 1.25])))
    return out


def _state(window: RateWindow) -> dict:
    def w(x: Window | None) -> tuple | None:
        return None if x is None else (x.kind, x.start_t, x.end_t, x.steps, x.tokens, x.padded)

    return {
        "records": window.records,
        "last": window.last,
        "head": list(window.head),
        "head_intervals": list(window.head_intervals),
        "recent": list(window.recent),
        "blocks": (window.blocks.blocks, window.blocks.size, window.blocks.fill),
        "binned": window.durations.binned,
        "steady": w(window.steady()),
        "trailing": w(window.trailing()),
        "spread": window.spread(),
        "recent_after_read": list(window.recent),
    }


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("detail", [True, False])
def test_folding_batches_gives_the_window_of_one_record_at_a_time(seed, detail):
    rng = random.Random(seed)
    n = rng.choice([1, 2, 3, 4, 5, 40, 700, EXACT_DURATIONS + 1500])
    records = _records(rng, n)
    one, folded = RateWindow(detail), RateWindow(detail)
    for record in records:
        one.add(*record)
    i = 0
    while i < n:  # batches of every size, a read between some of them
        size = rng.choice([0, 1, 2, 3, 7, 100, 3000])
        folded.add_many(records[i : i + size])
        i += size
        if rng.random() < 0.3:
            middle = RateWindow(detail)
            for record in records[:i]:
                middle.add(*record)
            assert _state(folded) == _state(middle)
    assert _state(folded) == _state(one)


@pytest.mark.parametrize("seed", range(4))
def test_the_step_clock_folds_what_it_kept_into_the_window_and_the_record_interval(seed):
    """The clock keeps its records raw and folds them when its window or record interval is
    read, or `FOLD_EVERY` at a time: the window of one record at a time, and the moving
    average of the gaps between records as updated at each record (a record out of order
    adds no gap, the next gap is from it)."""
    rng = random.Random(100 + seed)
    records = _records(rng, FOLD_EVERY * 2 + 300)
    clock, one = StepClock(), RateWindow()
    average, prev = MovingAverage(ALPHA, 1), None
    for i, (t, k, tokens, _) in enumerate(records):
        clock.step_values(t, k, tokens, None, i)
        one.add(t, k, tokens, tokens)
        if prev is not None and t > prev:
            average.update(t - prev)
        prev = t
        if rng.random() < 0.002 or i == len(records) - 1:
            assert _state(clock.window) == _state(one)
            got = clock.record_interval
            assert (got.seen, got.value, got.previous) == (
                average.seen, average.value, average.previous
            )
    assert clock.window.records == len(records) and not clock._raw


def _hello(t: float, rank: int, local_rank: int) -> dict:
    return rec("hello", t, rank=rank, world_size=3, local_rank=local_rank, probes=["steps"])


@pytest.mark.parametrize(
    ("moves", "rank0_from"), [((), 0), ((400,), 0), ((400, 900), 0), ((0,), 0), ((50,), 100)]
)
def test_each_ranks_step_time_is_its_own_records_window_while_the_clock_moves(moves, rank0_from):
    """The clock rank's step time is read from the step clock's window while the clock has
    taken that rank's records alone; a hello that moves the clock (here to rank 1, then back to
    rank 0) leaves each rank with the window of its own records, as a window per rank fed one
    record at a time gives (slow rank 2, out-of-order and k=2 records, a stall; rank 0 starting
    late, after the clock moved to a rank with records of its own)."""
    rng = random.Random(len(moves))
    engine, own = Engine(), {r: RateWindow(False) for r in range(3)}
    engine.feed(rec("run.start", 0.0, rank=None, src="tm", argv=["t.py"], declared={}))
    hellos = {at: _hello(1.0 + at * 0.1, rank, 0) for at, rank in zip(moves, (1, 0), strict=False)}
    t = 1.0
    checked = 0
    for i in range(1300):
        if i in hellos:
            engine.feed(hellos[i])
        t += rng.choice([0.1, 0.11, 0.3]) + (45.0 if i == 1000 else 0.0)
        for r, late in ((0, 0.0), (1, 0.001), (2, 0.04 * (i % 3))):
            if r == 0 and i < rank0_from:
                continue
            at = t + late - (0.5 if i % 97 == 0 else 0.0)
            k = 2 if i % 11 == 0 else 1
            engine.feed(rec("step", at, rank=r, k=k, tokens=100.0 * k))
            own[r].add(at, k)
        if i in (2, 3, 200, 401, 450, 901, 1010, 1299):
            for finished in (False, True):
                table = engine.ranks.snapshot(finished)
                if not finished and engine.clock.records:
                    assert engine.snapshot()["ranks"] == table
                spans = {r: w.steady() if finished else w.trailing() for r, w in own.items()}
                want = {str(r): s.step_time() for r, s in spans.items() if s is not None}
                assert table is not None and table["step_time_s"] == want, (i, finished)
                checked += 1
    assert checked == 16
    assert engine.ranks.clock is (engine.clock if moves in ((), (0,)) else None)


def test_trailing_starts_where_the_steady_window_would_have_it():
    """`RateWindow.trailing` reads the steady window's start from `head` itself (no Window for
    it): on random runs, short ones included, its window is the one taken through `steady`."""
    import random

    from trainmeter.engine.rate import SPAN_S, RateWindow, Window

    def by_steady(w: RateWindow) -> Window | None:
        steady = w.steady()
        if steady is None or w.last is None:
            return None
        recent, horizon = w.recent, w.last[0] - SPAN_S
        while len(recent) > 1 and recent[1][0] <= horizon:
            recent.popleft()
        first = recent[0]
        if first[0] <= horizon and first[0] > steady.start_t:
            return Window("trailing", first, w.last)
        return Window("trailing", w.head[w.warmup], w.last)

    def fields(x: Window | None) -> tuple | None:
        return None if x is None else (x.kind, x.start_t, x.end_t, x.steps, x.tokens,
                                       x.padded, x.seconds)

    for seed in range(40):
        rng = random.Random(seed)
        w, t = RateWindow(), 0.0
        for _ in range(rng.randint(0, 400)):
            t += rng.choice((0.0, 0.01, 0.3, 2.0, 45.0))
            w.add(t, rng.randint(1, 3), 100.0, 120.0)
            assert fields(w.trailing()) == fields(by_steady(w)), seed
