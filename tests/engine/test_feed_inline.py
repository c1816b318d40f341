"""A replay's block feed (`Engine.feed_many`, the typed step, metric and phase taken in line with
what stays the same read once a block) leaves the state that feeding each record as a dict
leaves, and the data window, trimmed when read or once `TRIM_EVERY` points wait, holds the
points that trimming after every step record holds.

Each test reads the state after every record or block on one side and once at the end on the
other, over the odd orders a job's log holds: records out of order, a stall, k > 1, the clock
rank's hello arriving between a block's records, a value past a float's range."""

from __future__ import annotations

import json
import random
from collections import deque

import pytest

from trainmeter.engine import Engine
from trainmeter.engine.alerts import DATA_WINDOW_S, DataWindow
from trainmeter.runlog.decode import Decoder

typed = pytest.importorskip("trainmeter.runlog.typed")


class _Reference:
    """The data window's rule applied after every point, as the engine did before."""

    def __init__(self) -> None:
        self.points: deque[tuple[float, float]] = deque()

    def step(self, t: float, c: float) -> None:
        points = self.points
        points.append((t, c))
        while len(points) > 2 and points[1][0] <= t - DATA_WINDOW_S:
            points.popleft()


def _times(rng: random.Random, n: int) -> list[tuple[float, float]]:
    t, c, out = 0.0, 0.0, []
    for _ in range(n):
        roll = rng.random()
        if roll < 0.03:
            t -= rng.uniform(0.0, 90.0)  # out of order, at times past the window's length
        elif roll < 0.05:
            pass  # the same time again
        elif roll < 0.06:
            t += rng.uniform(50.0, 200.0)  # a stall longer than the window
        else:
            t += rng.choice([0.01, 0.1, 0.5, rng.uniform(0.0, 2.0)])
        c += rng.choice([0.0, 0.0, 0.004, rng.uniform(0.0, 0.3)])
        out.append((t, c))
    return out


@pytest.mark.parametrize("seed", range(12))
def test_the_data_window_trimmed_in_batches_holds_the_points_trimmed_each_step(seed: int) -> None:
    rng = random.Random(seed)
    points = _times(rng, 3000)
    reference, each, once = _Reference(), DataWindow(), DataWindow()
    read_every = rng.choice([1, 7, 100, 300])
    for i, (t, c) in enumerate(points):
        reference.step(t, c)
        each.step(t, c)
        once.step(t, c)
        if i % read_every == 0:
            each.share()  # a snapshot's read trims what waits
            assert each.points == list(reference.points)
        assert len(once.points) - once.trimmed < DataWindow.TRIM_EVERY  # bounded
    assert once.share() == each.share()
    assert once.points == each.points == list(reference.points)


def test_the_data_window_applies_each_horizon_when_the_newest_point_is_not_the_latest() -> None:
    """Points whose last is older than one before it: one pass with the last one's horizon
    would keep the point the later horizon dropped."""
    window, reference = DataWindow(), _Reference()
    for t in (0.0, 1.0, 2.0, 100.0, 3.0):
        window.step(t, t / 10)
        reference.step(t, t / 10)
    window.share()
    assert window.points == list(reference.points) == [(2.0, 0.2), (100.0, 10.0), (3.0, 0.3)]


def _line(t: float, kind: str, d: dict, rank: int | None = 0, src: str = "agent") -> bytes:
    record = {"v": 1, "t": round(t, 6), "src": src, "rank": rank, "pid": 100 + (rank or 0),
              "kind": kind, "d": d}
    return json.dumps(record, separators=(",", ":")).encode()


def _log(rng: random.Random) -> list[bytes]:
    probes = ["steps", "tokens", "dataloader"]
    lines = [
        _line(0.0, "run.start", {"argv": ["train.py"], "declared": {}}, None, "tm"),
        _line(0.1, "phase", {"name": "data", "s": 0.05, "n": 1}),  # before any step
        _line(0.2, "hello", {"world_size": 2, "local_rank": 1, "rank": 1, "probes": probes}, 1),
    ]
    t = 1.0
    for i in range(1, 1500):
        t += rng.choice([0.05, 0.1, 0.1, 0.3]) if i % 400 else 70.0  # a stall now and then
        if i == 300:  # the counts change mid-run: records count by those of their time
            lines.append(_line(t, "fact", {"key": "dp", "value": 4, "source": "detected"}))
        if i == 700:
            lines.append(_line(t, "fact", {"key": "tokens_per_step", "value": 3000,
                                           "source": "emitted"}, 0, "emit"))
        if i == 200:  # the clock rank's own hello, late: the clock moves from rank 1 to 0
            lines.append(_line(t, "hello", {"world_size": 2, "local_rank": 0, "rank": 0,
                                            "probes": probes}))
        for rank in (0, 1):
            when = t - 0.5 if rng.random() < 0.05 else t  # out of order
            k = rng.choice([1, 1, 1, 2])
            if rng.random() < 0.7:
                lines.append(_line(when - 0.01, "phase",
                                   {"name": rng.choice(["data", "data", "eval"]), "s": 0.01,
                                    "n": rng.choice([1, 2])}, rank))
            lines.append(_line(when, "step", {"k": k, "tokens": 512 * k, "n": i}, rank))
            value: float = rng.choice([1.0 / i, i, 3])
            lines.append(_line(when, "metric", {"key": rng.choice(["loss", "train/loss"]),
                                                "value": value, "via": "emit", "step": i}, rank,
                               "emit"))
        if i % 97 == 0:
            lines.append(_line(t, "metric", {"key": "big", "value": 10**400, "via": "emit"},
                               0, "emit"))  # past a float's range: the record is ignored
        if i % 10 == 0:
            lines.append(_line(t, "sample.host", {"procs": 3, "cpu_s": t, "rss_kb": 1000}, None,
                               "tm"))
    lines.append(_line(t + 1.0, "phase", {"name": "checkpoint", "s": 0.5, "n": 1}))
    return lines


@pytest.mark.parametrize("seed", range(4))
def test_a_block_feed_of_typed_records_is_a_feed_of_each_dict(seed: int) -> None:
    """Typed records fed in random blocks, a snapshot and the points read after each block,
    against the same records as dicts fed one at a time and read once at the end."""
    rng = random.Random(seed)
    lines = _log(rng)
    read = [r for _, r in typed.typed_many(Decoder(), lines)]
    plain = [r for _, r in Decoder().many(lines)]
    assert len(read) == len(plain) == len(lines)
    assert sum(type(r) is not dict for r in read) > len(read) * 0.9  # read typed
    blocks, each = Engine(), Engine()
    blocks.take_points(), each.take_points()
    points = []
    i = 0
    while i < len(read):
        size = rng.choice([1, 2, 3, 50, 300])
        blocks.feed_many(read[i : i + size])
        i += size
        blocks.snapshot(now=1e4)  # reads every part: folds and trims what waits
        points += blocks.take_points()
    for record in plain:
        each.feed(record)
    assert blocks.snapshot(now=1e4) == each.snapshot(now=1e4)
    assert blocks.sample(now=1e4) == each.sample(now=1e4)
    assert points == each.take_points()
    assert (blocks.records, blocks.ignored) == (each.records, each.ignored)
    assert blocks.ignored > 0  # the values past a float's range
    assert blocks.data_window.points == each.data_window.points
    assert blocks.clock.tokens_seen == each.clock.tokens_seen
    assert blocks.snapshot(now=1e4)["tokens_counted"] == "declared"
    assert blocks.ledger.phase_s == each.ledger.phase_s and blocks.ledger.tail == each.ledger.tail

