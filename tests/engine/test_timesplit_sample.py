"""The time split's sample path (`timesplit_sample.py`) gives `TimeLedger.section`'s values, the
same floats, and answers for them: when it says every float is finite, every one is; and
`Engine.sample` with a split that overflowed is the snapshot's."""

from __future__ import annotations

import random
from typing import Any

from trainmeter.engine.finite import all_finite
from trainmeter.engine.timesplit import TimeLedger
from trainmeter.engine.timesplit_sample import SplitSampler

from . import build as b

PROBES = ("dataloader", "checkpoint", "eval", "collectives", "steps")
PHASES = ("data", "checkpoint", "eval", "comm", "other")


def _ledger(rng: random.Random, huge: bool) -> tuple[TimeLedger, float, float | None]:
    """A ledger fed at random (phases before, inside and after the steps), the latest record's
    t and the `now` to read it at."""
    ledger = TimeLedger()
    t = rng.uniform(0.0, 5.0)
    if rng.random() < 0.9:
        ledger.t_start = t
    if rng.random() < 0.3:
        ledger.node_uptime_s = rng.choice((0.0, 100.0, 1e308))
    for _ in range(rng.randrange(0, 12)):
        t += rng.uniform(0.0, 2.0)
        if rng.random() < 0.5:
            ledger.step(t)
        else:
            seconds = rng.choice((0.0, 0.01, 1.5, 1e308)) if huge else rng.uniform(0.0, 2.0)
            ledger.phase(rng.choice(PHASES), seconds, rng.randrange(1, 4), t)
    if rng.random() < 0.3:
        t += rng.uniform(0.0, 3.0)
        ledger.t_end = t
    now = rng.choice((None, 0.0, t + 1.0, t - 1.0))
    return ledger, t, now


def test_the_values_are_the_sections_and_finite_when_it_says_so() -> None:
    rng = random.Random(30)
    sampler = SplitSampler()  # one for every ledger: the fixed parts follow each layout
    said_finite = 0
    for i in range(3000):
        huge = i % 3 == 0
        ledger, t_last, now = _ledger(rng, huge)
        for _ in range(2):  # twice: the second reads the fixed parts it made
            probes = set(rng.sample(PROBES, rng.randrange(0, len(PROBES) + 1)))
            world = rng.choice((1, 1, 2))
            got, finite = sampler.sample(ledger, t_last, now, probes, world)
            want = ledger.section(t_last, now, probes, None, world, detail=False).values
            assert repr(got) == repr(want), i  # the same keys in order, every float's digits
            if finite:
                said_finite += 1
                assert all_finite(got), i
            elif not huge:
                assert not all_finite(got), i  # no overflow here: only a real infinity says so
    assert said_finite > 3000  # it does answer


def test_a_split_that_overflows_is_the_snapshots() -> None:
    # two data waits of 1e308 s: their sum, and the split's parts and goodput, overflow
    records = [b.start(0.0), b.hello(0.5, probes=("steps", "dataloader"))]
    records += [b.step(1.0 + i, tokens=100, n=i) for i in range(1, 6)]
    records += [b.phase(3.5, "data", 1e308), b.phase(4.5, "data", 1e308)]
    records += [b.step(7.0, tokens=100, n=6), b.rec("sample.host", 7.0, rank=None, src="tm",
                                                    procs=1, cpu_s=1.0, rss_kb=1e306)]
    engine = b.Engine()
    for record in records:
        engine.feed(record)
    sample, snap = engine.sample(now=8.0), engine.snapshot(now=8.0)
    parts: list[dict[str, Any]] = sample["time"]["parts"]
    assert [p["s"] for p in parts if p["name"] in ("data", "compute")] == [None, 0.0]
    assert sample["host"]["rss_b"] is None  # another part's infinity: the whole check
    for key, value in sample.items():
        assert snap[key] == value, key
    some = engine.sample(now=8.0, keys=frozenset({"time", "steps"}))
    assert some == {"steps": sample["steps"], "time": sample["time"]}
