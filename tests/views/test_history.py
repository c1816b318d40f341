"""The bounded history: fixed memory, spikes survive merging, axes, incremental dumps."""

from __future__ import annotations

import math
import operator
from typing import Any

import pytest

from trainmeter.engine import Engine
from trainmeter.views.history import BoundedSeries, History


def test_buckets_stay_bounded_and_merge_pairwise():
    s = BoundedSeries("loss", "loop", capacity=8)
    for i in range(8):
        s.add(float(i), i, i * 10, i * 0.5)
    assert len(s) == 8 and s.span == 1 and s.epoch == 0
    s.add(8.0, 8, 80, 4.0)  # full: pairs merge (8 -> 4 buckets of 2), then the point starts a 5th
    assert s.epoch == 1 and s.span == 2 and len(s) == 5
    # bucket 0 held points 0 and 1: min 0, max 1, last 1, at the x of point 1
    assert (s.lo[0], s.hi[0], s.last[0], s.step[0], s.tokens[0], s.time[0]) == (0, 1, 1, 1, 10, 0.5)
    for i in range(9, 1000):
        s.add(float(i), i, i * 10, i * 0.5)
    assert len(s) <= 8 and s.points == 1000
    assert sum(s.count) == 1000  # every point is counted in exactly one bucket
    assert s.last[-1] == 999 and s.step[-1] == 999


def test_a_spike_survives_any_merging():
    s = BoundedSeries("loss", "loop", capacity=16)
    for i in range(100_000):
        s.add(1e6 if i == 54_321 else 1.0, i, None, None)
    assert max(s.hi) == 1e6
    assert min(s.lo) == 1.0
    # the spike's bucket covers step 54321: its right edge is at or after it
    k = s.hi.index(1e6)
    assert s.step[k] >= 54_321 and (k == 0 or s.step[k - 1] < 54_321)


def test_capacity_must_be_even():
    with pytest.raises(ValueError):
        BoundedSeries("x", "loop", capacity=7)


def _step(n, tokens, t, rank=None):
    return {"v": 1, "kind": "step", "t": t, "src": "agent", "rank": rank, "pid": 1,
            "d": {"k": 1, "n": n, "tokens": tokens}}


def _metric(key, value, t, step=None, rank=None):
    d = {"key": key, "value": value}
    if step is not None:
        d["step"] = step
    return {"v": 1, "kind": "metric", "t": t, "src": "emit", "rank": rank, "pid": 1, "d": d}


class Fed:
    """A history fed as every view feeds one: records go to the engine, its points to the
    history (`Engine.take_points`, the one reader of metric and step records)."""

    def __init__(self, h: History) -> None:
        self.h = h
        self.engine = Engine()
        self.engine.take_points()

    def __call__(self, *records) -> None:
        for record in records:
            self.engine.feed(record)
        self.h.on_points(self.engine.take_points(), self.engine.t0)


def test_records_place_points_at_step_tokens_time_and_flops_follows_snapshot():
    h = History(capacity=16)
    feed = Fed(h)
    feed({"v": 1, "kind": "run.start", "t": 100.0, "src": "tm", "rank": None, "pid": 1, "d": {}})
    feed(_step(1, 1024, 101.0))
    feed(_metric("train_loss", 4.0, 101.5, step=1))
    feed(_step(2, 1024, 102.0))
    feed(_metric("train_loss", 3.0, 102.5))  # no step: the engine's step count
    cols = h.series["train_loss"].columns()
    assert cols["step"] == [1, 2]
    assert cols["tokens"] == [1024, 2048]
    assert cols["time"] == [1.5, 2.5]
    assert cols["flops"] == [None, None]
    assert "flops" in h.axes_absent()
    # the engine says 2 ranks saw 4096 tokens in 2 steps, 600 FLOPs a token (megatron)
    h.on_snapshot(
        {"steps": 2, "tokens_seen": 4096, "tokens_per_s": 2000.0,
         "flops_per_token": {"value": 600.0, "convention": "megatron"},
         "mfu": {"value": 0.25}, "time": {"elapsed_s": 3.0, "goodput": 0.5}},
        now=103.0,
    )
    assert h.flops_per_token == 600.0 and "flops" not in h.axes_absent()
    dump = h.dump()
    loss = dump["series"]["train_loss"]
    assert loss["flops"] == [1024 * 600.0, 2048 * 600.0]
    tps = dump["series"]["tokens_per_s"]
    assert tps["last"] == [2000.0] and tps["step"] == [2] and tps["tokens"] == [4096]
    assert tps["time"] == [3.0] and tps["group"] == "system"
    assert dump["series"]["mfu"]["last"] == [0.25]
    assert dump["series"]["goodput"]["last"] == [0.5]
    assert "ofu" not in dump["series"]  # absent stays absent, never a zero


def test_a_value_logged_at_a_step_the_count_has_passed_gets_that_steps_tokens():
    h = History()
    feed = Fed(h)
    feed(*(_step(n, 100, float(n)) for n in range(1, 5)))
    feed(_metric("val_loss", 2.0, 4.5, step=2))  # 4 steps, 400 tokens counted: step 2 had 200
    assert h.series["val_loss"].columns()["tokens"] == [200.0]


def test_non_numbers_and_other_ranks_steps_are_ignored():
    h = History()
    feed = Fed(h)
    feed(_metric("loss", float("nan"), 1.0))
    feed(_metric("loss", "x", 1.0))
    feed(_metric("loss", True, 1.0))
    feed({**_step(50, 9, 1.0), "rank": 1})
    assert h.series == {}
    feed(_metric("loss", 2.0, 2.0))  # rank 1's steps moved no count: step 0, no tokens
    assert h.series["loss"].columns()["step"] == [0]
    assert h.series["loss"].columns()["tokens"] == [None]


def test_each_series_comes_from_the_lowest_rank_that_logs_it():
    """The engine's rule: a loss logged only on the last pipeline rank is kept; once a lower
    rank logs the same key, the higher rank's points are left out."""
    h = History()
    feed = Fed(h)
    feed(_metric("loss", 4.0, 1.0, rank=3))
    assert h.series["loss"].last == [4.0]
    feed(_metric("loss", 3.0, 2.0, rank=0))
    feed(_metric("loss", 9.0, 3.0, rank=3))
    assert h.series["loss"].last == [4.0, 3.0]


def test_gpu_sums_use_every_gpu():
    h = History()
    h.on_snapshot({"gpus": {"0": {"power_w": 600.0}, "1": {"power_w": 70.0}}}, now=5.0)
    assert h.series["power_w"].last == [670.0]


def test_dump_since_sends_only_what_is_new():
    h = History(capacity=4)
    feed = Fed(h)
    for i in range(3):
        feed(_metric("a", float(i), float(i), step=i))
    first = h.dump()
    assert first["series"]["a"]["last"] == [0.0, 1.0, 2.0]
    marks = h.marks()
    assert h.dump(marks)["series"] == {}  # nothing new
    feed(_metric("a", 3.0, 3.0, step=3))
    new = h.dump(marks)["series"]["a"]
    assert new["reset"] is False and new["start"] == 2 and new["last"] == [2.0, 3.0]
    marks = h.marks()
    feed(_metric("a", 4.0, 4.0, step=4))  # full: re-cut, sent whole
    new = h.dump(marks)["series"]["a"]
    assert new["reset"] is True and new["start"] == 0 and new["last"] == [1.0, 3.0, 4.0]


def test_series_count_is_bounded():
    h = History(max_series=3)
    feed = Fed(h)
    for i in range(10):
        feed(_metric(f"k{i}", 1.0, 1.0))
    assert len(h.series) == 3 and len(h.dropped_series) == 7


def test_ten_times_the_points_same_buckets():
    small, big = BoundedSeries("a", "loop", capacity=64), BoundedSeries("a", "loop", capacity=64)
    for i in range(10_000):
        small.add(math.sin(i), i, i, i)
    for i in range(100_000):
        big.add(math.sin(i), i, i, i)
    assert len(small) <= 64 and len(big) <= 64


def test_node_series_and_cpu_busy_as_one_minus_idle():
    h = History()
    h.on_snapshot(
        {"node": {"cpu": {"idle": 0.25}, "memory": {"used_b": 3e9},
                  "rates_b_s": {"net_rx_b": 100.0, "disk_io_write_b": 0.0}}},
        now=1.0,
    )
    assert h.series["node_cpu_busy"].last == [0.75]  # 1 - 0.25
    assert h.series["node_memory_used_b"].last == [3e9]
    assert h.series["node_net_rx_b_s"].last == [100.0]
    assert h.series["node_disk_write_b_s"].last == [0.0]  # a measured zero is a zero
    assert "node_disk_read_b_s" not in h.series  # not in the sample: absent, not zero


def test_a_snapshots_points_follow_the_one_number_rule_of_dig():
    """`on_snapshot` walks the paths without "*" in line (one lookup per snapshot key): on every
    odd shape it must add exactly the points `_dig`, the reference rule, reads at the full
    path (a finite int or float, a bool or string or NaN or an integer past 2**53 handled as
    `snapread.finite` does, a missing or non-dict level absent), in the tables' order."""
    from trainmeter.views.history import _DRAWN, _dig

    odd = [0.25, -0.0, 3, 2**60, True, None, "7", math.nan, math.inf, {}, [1.0], {"value": 2.0}]
    for i, x in enumerate(odd):
        snap = {
            "tokens_per_s": x,
            "step_time_s": odd[(i + 1) % len(odd)],
            "mfu": {"value": x},
            "ofu": x,  # not a dict: its value is absent
            "time": {"goodput": odd[(i + 2) % len(odd)]},
            "ladder": {"mean": {"gpu_util": x, "sm_active": 0.5, "tensor_active": odd[(i + 3) % len(odd)]}},
            "gpus": {"0": {"power_w": x}, "1": {"power_w": 100.0}, "2": x},
            "memory": {"ranks": {"0": {"allocated_b": x}}, "alloc_retries": x},
            "host": {"rss_b": x},
            "node": {"memory": x, "rates_b_s": {"net_rx_b": x}, "cpu": {"idle": x}},
        }
        h = History()
        h.on_snapshot(snap)
        expected = {}
        for key, name, path, complement, _unit, _label in _DRAWN:
            value = _dig(snap, (key, *path))
            if value is not None:
                expected[name] = 1.0 - value if complement else value
        got = {name: s.last[0] for name, s in h.series.items()}
        assert list(got) == list(expected) and repr(got) == repr(expected), x  # -0.0 stays -0.0
        assert h.version == len(expected)


def test_a_block_of_points_fills_the_buckets_as_one_add_a_point():
    """`on_points` hands each key's points to its series together (`BoundedSeries.pending`,
    stored by `store`): the buckets, through several merges, a NaN, ties of 0.0 and -0.0 and
    interleaved keys, are exactly those of `add` called point by point."""
    values = [1.0, -0.0, 0.0, math.nan, 5.0, -3.0, 2.0, 0.0, 7.0, -0.0] * 8
    keys = ["loss"] * 30 + ["lr"] * 3 + ["loss"] * 20 + ["lr", "loss"] * 8 + ["grad"] + ["loss"]
    points = [(k, i, v, i * 0.5, None if i % 3 else i * 8.0)  # key, step, value, time, tokens
              for i, (k, v) in enumerate(zip(keys, values[: len(keys)], strict=True))]
    h = History(capacity=4)
    starts = [0, 0, 1, 9, 33, 34, 60, len(points)]  # blocks of several sizes, one empty
    for a, b in zip(starts, starts[1:], strict=False):
        h.on_points(points[a:b])
    by_hand = {k: BoundedSeries(k, "loop", capacity=4) for k in dict.fromkeys(keys)}
    for key, step, value, time, tokens in points:
        by_hand[key].add(value, step, tokens, time)
    assert list(h.series) == list(by_hand) and h.version == len(points)
    for key, s in by_hand.items():
        got = h.series[key]
        assert s.epoch > 0 or key != "loss"
        assert repr(got.describe()) == repr(s.describe())
        assert repr(got.columns()) == repr(s.columns())  # NaN and -0.0 compared as written
        assert got.count == s.count


class _OnePoint:
    """The buckets as `BoundedSeries.add` made them one point at a time before points were
    stored together (`store`): the reference `store` must match object for object."""

    def __init__(self, capacity: int) -> None:
        self.capacity, self.span, self.epoch, self.points = capacity, 1, 0, 0
        self.step: list[Any] = []
        self.tokens: list[Any] = []
        self.time: list[Any] = []
        self.lo: list[Any] = []
        self.hi: list[Any] = []
        self.last: list[Any] = []
        self.count: list[int] = []

    def add(self, value: Any, step: Any, tokens: Any, time: Any) -> None:
        self.points += 1
        n = len(self.count)
        if n and self.count[-1] < self.span:
            if value < self.lo[-1]:
                self.lo[-1] = value
            if value > self.hi[-1]:
                self.hi[-1] = value
            self.last[-1] = value
            self.count[-1] += 1
            self.step[-1], self.tokens[-1], self.time[-1] = step, tokens, time
            return
        if n >= self.capacity:
            pairs = list(range(0, n, 2))
            self.lo = [min(self.lo[k], self.lo[k + 1]) for k in pairs]
            self.hi = [max(self.hi[k], self.hi[k + 1]) for k in pairs]
            self.count = [self.count[k] + self.count[k + 1] for k in pairs]
            self.last, self.step = self.last[1::2], self.step[1::2]
            self.tokens, self.time = self.tokens[1::2], self.time[1::2]
            self.span *= 2
            self.epoch += 1
        for xs, x in ((self.step, step), (self.tokens, tokens), (self.time, time), (self.lo, value),
                      (self.hi, value), (self.last, value), (self.count, 1)):
            xs.append(x)

    def fields(self) -> tuple[Any, ...]:
        return (self.span, self.epoch, self.points, self.step, self.tokens, self.time, self.lo,
                self.hi, self.last, self.count)


_FIELDS = ("span", "epoch", "points", "step", "tokens", "time", "lo", "hi", "last", "count")


def test_points_stored_together_make_the_buckets_of_one_point_at_a_time():
    """`BoundedSeries.store` puts any number of pending points in the buckets at once (the open
    bucket, new buckets while they fit, a merge when they are full, again): for random values
    (NaN, ties of 0.0 and -0.0, ints), capacities and points stored after every point, in random
    blocks or all at the end (past `PENDING`: stored as they come), every field is the one the
    old point-at-a-time `add` made, the same objects in the same order (`is`, not `==`)."""
    import random

    from trainmeter.views.history import PENDING

    pool = [1.0, -0.0, 0.0, math.nan, 5.0, -3.0, 2, 7.5, -0.0, 0.0]
    for seed in range(120):
        rng = random.Random(seed)
        capacity = rng.choice([2, 4, 6, 8, 16])
        n = rng.choice([0, 1, 5, 40, 300, PENDING + 37, 3 * PENDING])
        points = [(rng.choice(pool) if rng.random() < 0.5 else rng.uniform(-9, 9), i,
                   None if i % 3 else float(i), i * 0.5) for i in range(n)]
        ref, got = _OnePoint(capacity), BoundedSeries("k", "loop", capacity=capacity)
        store_after = rng.choice([1, 3, 64, None])  # read (so store) every few points, or never
        for value, step, tokens, time in points:
            ref.add(value, step, tokens, time)
            got.add(value, step, tokens, time)
            if store_after and rng.random() < 1 / store_after:
                assert len(got) == len(ref.count)
        assert len(got.pending) < PENDING
        fields = (got.span, got.epoch, got.points, got.step, got.tokens, got.time, got.lo,
                  got.hi, got.last, got.count)
        assert not got.pending
        for name, mine, theirs in zip(_FIELDS, fields, ref.fields(), strict=True):
            if name == "count" or not isinstance(theirs, list):  # counts are made, not given
                assert mine == theirs, (seed, name)
            else:
                assert len(mine) == len(theirs), (seed, name)
                assert all(map(operator.is_, mine, theirs)), (seed, name)


def test_a_snapshots_rows_and_other_points_of_one_series_keep_their_order():
    """The walk keeps a snapshot's numbers as a row (`SnapshotRows`) stored later: a loop key
    named as a system series (`tokens_per_s` logged by the loop), a point added to that series
    by hand, reads at random moments and the rows past `PENDING` all leave the series' points in
    the order they came, with `version` counting each once."""
    import random

    from trainmeter.views.history import PENDING

    for seed in range(20):
        rng = random.Random(seed)
        h = History()
        expected: list[float] = []
        counted = 0  # points `version` counts (a point added to a series by hand is not)
        for i in range(rng.choice([5, 40, PENDING + 30])):
            value = float(i)
            roll = rng.random()
            if roll < 0.5:
                h.on_snapshot({"tokens_per_s": value, "steps": i}, 10.0 + i)
                counted += 1
            elif roll < 0.8:
                h.on_points([("tokens_per_s", i, value, i * 0.5, None)], 0.0)
                counted += 1
            elif "tokens_per_s" in h.series:
                h.series["tokens_per_s"].add(value, i, None, i * 0.5)
            else:
                continue
            expected.append(value)
            if rng.random() < 0.1:
                assert list(h.series["tokens_per_s"].last) == expected, seed
        got = h.series["tokens_per_s"]
        assert list(got.last) == expected and got.points == len(expected), seed
        assert h.version == counted, seed


def test_the_written_out_walk_adds_what_dig_reads_on_random_shapes():
    """`on_snapshot`'s walk is written out from the tables (`_walk_source`: a level shared by
    several series walked once): on random snapshots (each path's levels present, missing, not
    a dict, or an odd number; "*" levels of mixed items), fed three to a history so the series
    exist after the first, every series takes exactly the points `_dig` reads, in order."""
    import random

    from trainmeter.views.history import _DRAWN, _dig

    odd = [0.5, -0.0, 7, 2**60, True, None, "3", math.nan, -math.inf, [2.0], 1e308]

    def shape(path: tuple[str, ...], rng: random.Random) -> Any:
        roll = rng.random()
        if roll < 0.15:
            return rng.choice(odd)  # a leaf where a level was due (or the number itself)
        if not path:
            return rng.choice(odd)
        node: dict[str, Any] = {}
        if path[0] == "*":
            for i in range(rng.randint(0, 3)):
                node[str(i)] = shape(path[1:], rng) if rng.random() < 0.8 else rng.choice(odd)
        elif roll > 0.25:
            node[path[0]] = shape(path[1:], rng)
        if rng.random() < 0.3:
            node["other"] = 1.0
        return node

    for seed in range(60):
        rng = random.Random(seed)
        h = History()
        expected: dict[str, list[float]] = {}
        for _ in range(3):
            snap: dict[str, Any] = {}
            for key, _name, path, _c, _u, _l in _DRAWN:
                if key not in snap and rng.random() < 0.85:
                    snap[key] = shape(path, rng)
            for key, name, path, complement, _unit, _label in _DRAWN:
                value = _dig(snap, (key, *path))
                if value is not None:
                    expected.setdefault(name, []).append(1.0 - value if complement else value)
            h.on_snapshot(snap)
        got = {name: list(s.last) for name, s in h.series.items()}
        assert list(got) == list(expected) and repr(got) == repr(expected), seed
        assert h.version == sum(map(len, expected.values())), seed


def test_the_written_out_walk_module_is_the_tables_own():
    """`views/history_walk.py` is `_walk_source`'s text for the tables as they are: a table
    changed without writing it again (`python -m trainmeter.views.history`) fails here."""
    from pathlib import Path

    from trainmeter.views import history

    written = Path(history.__file__).with_name("history_walk.py").read_text(encoding="utf-8")
    assert written == history._walk_source(history._DRAWN_BY_KEY), (
        "views/history_walk.py is stale: run python -m trainmeter.views.history"
    )
