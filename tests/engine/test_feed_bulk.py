"""A replay's block hands the clock rank's steps and phases to the step clock and the time
ledger in one call each (`StepClock.step_many`, `TimeLedger.many`): the state after it is the
state one call a record leaves, over random runs (records out of order and at equal times,
k = 0 and k > 1, tokens absent, real tokens, a declared count, phases before the first step,
between steps and after the last), cut into random blocks."""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

import pytest

from trainmeter.engine.throughput import StepClock
from trainmeter.engine.timesplit import TimeLedger


def _step(t: float, k: Any, tokens: Any, real: Any, n: Any) -> SimpleNamespace:
    """A typed step record as `runlog/typed.py` reads one: `t`, and `d`'s fields."""
    return SimpleNamespace(t=t, d=SimpleNamespace(k=k, tokens=tokens, real_tokens=real, n=n))


def _steps(rng: random.Random, n: int) -> list[SimpleNamespace]:
    t, out = 1.0, []
    real = rng.random() < 0.5
    for i in range(n):
        roll = rng.random()
        if roll < 0.03:
            t -= rng.uniform(0.0, 5.0)  # out of order
        elif roll < 0.05:
            pass  # the same time again
        elif roll < 0.06:
            t += rng.uniform(40.0, 100.0)  # a stall
        else:
            t += rng.choice([0.05, 0.1, rng.uniform(0.0, 1.0)])
        k = rng.choice([1, 1, 1, 2, 0, None])
        tokens = rng.choice([512, 512, 1000, None])
        out.append(_step(rng.choice([t, round(t)]) if i % 50 == 0 else t, k, tokens,
                         rng.randrange(1, 512) if real and tokens else None,
                         rng.choice([i, i, None])))
    return out


def _clock_state(clock: StepClock) -> dict[str, Any]:
    state = {k: v for k, v in vars(clock).items() if not k.startswith("_")}
    interval = clock.record_interval
    state["interval"] = (interval.seen, interval.value, interval.previous)
    window = clock.window  # folds what waits
    state["window"] = (window.records, window.last, list(window.head), list(window.recent),
                       list(window.durations.exact), dict(window.durations.bins),
                       [list(b) for b in window.blocks.blocks], window.blocks.fill)
    return state


@pytest.mark.parametrize("seed", range(8))
def test_the_clock_takes_a_block_of_steps_as_it_takes_each(seed: int) -> None:
    rng = random.Random(seed)
    records = _steps(rng, 1500)
    each, blocks = StepClock(), StepClock()
    for clock in (each, blocks):
        clock.dp = rng.choice([1, 4])
    blocks.dp = each.dp
    if seed % 3 == 0:
        each.declared_per_step = blocks.declared_per_step = 3000.0
    i, counts_seen = 0, 0
    while i < len(records):
        block = records[i : i + rng.choice([1, 2, 3, 40, 300])]
        counts = [blocks.counts()]
        assert counts[0] == each.counts()
        blocks.step_many(block, counts)
        for r, after in zip(block, counts[1:], strict=True):
            d = r.d
            each.step_values(r.t, d.k, d.tokens, d.real_tokens, d.n)
            assert after == each.counts()
            counts_seen += 1
        i += len(block)
        if rng.random() < 0.2:
            assert _clock_state(blocks) == _clock_state(each)
    assert _clock_state(blocks) == _clock_state(each)
    assert counts_seen == len(records) and each.records == len(records)
    assert each.window.records == len(records) and each.record_interval.value is not None


def test_the_clock_takes_an_empty_block_as_nothing() -> None:
    clock = StepClock()
    clock.step_many([])
    assert clock.last_t is None and clock.records == 0 and not clock._raw


def _events(rng: random.Random, n: int) -> list[Any]:
    """Phases (name, seconds, n, t) and steps (t) of the clock rank, as `feed_many` hands them."""
    t, out = 0.0, []
    for _ in range(rng.randrange(1, 4)):  # phases before the first step
        out.append(("data", rng.uniform(0.0, 0.1), 1, t))
    for _ in range(n):
        t += rng.choice([0.05, 0.1, rng.uniform(0.0, 1.0)])
        when = t - rng.uniform(0.0, 3.0) if rng.random() < 0.05 else t
        if rng.random() < 0.8:
            out.append((rng.choice(["data", "data", "eval", "checkpoint"]),
                        rng.choice([0.01, rng.uniform(0.0, 0.5), 0]), rng.choice([1, 2]),
                        when - 0.01))
        out.append(rng.choice([when, round(when)]))
        if rng.random() < 0.1:  # after the latest step, before the next
            out.append(("eval", rng.uniform(0.0, 1.0), 1, t + 0.02))
    for _ in range(rng.randrange(1, 4)):  # after the last step
        out.append(("checkpoint", rng.uniform(0.0, 2.0), 1, t + 1.0))
    return out


def _ledger_state(ledger: TimeLedger) -> tuple[Any, ...]:
    return (ledger.phase_s, ledger.phase_n, ledger.before, ledger.tail, ledger.first_t,
            ledger.last_t, ledger._tail_t)


@pytest.mark.parametrize("seed", range(8))
def test_the_ledger_takes_a_block_of_phases_and_steps_as_it_takes_each(seed: int) -> None:
    rng = random.Random(seed)
    events = _events(rng, 1200)
    each, blocks = TimeLedger(), TimeLedger()
    each_points: list[tuple[float, float]] = []
    block_points: list[tuple[float, float]] = []
    i = 0
    while i < len(events):
        block = events[i : i + rng.choice([1, 2, 5, 60, 400])]
        blocks.many(block, block_points)
        for event in block:
            if type(event) is tuple:
                each.phase(*event)
            else:
                each.step(event)
                each_points.append((event, each.phase_s.get("data", 0.0)))
        i += len(block)
        assert _ledger_state(blocks) == _ledger_state(each)
    assert block_points == each_points and len(each_points) == 1200
    assert each.before and each.tail  # both ends were reached


@pytest.mark.parametrize("value", [b"NaN", b"Infinity", b"-Infinity", b"1e400", b"-1e400"])
def test_a_typed_metric_value_is_finite(value: bytes) -> None:
    """`Engine.feed_many` takes a typed metric's float without testing it finite: the typed
    decoding refuses a value that is not (the line goes to the decoder, which decides)."""
    typed = pytest.importorskip("trainmeter.runlog.typed")
    from trainmeter.runlog.decode import Decoder

    head = b'{"v":1,"t":1.0,"src":"agent","rank":0,"pid":1,"kind":"metric","d":{"key":"loss",'
    line = head + b'"value":' + value + b',"via":"emit"}}'
    read = typed.typed_many(Decoder(), [line])  # the decoder skips it, or keeps it as a dict
    assert all(type(record) is dict for _, record in read)
    good = line.replace(value, b"2.5")
    ((_, record),) = typed.typed_many(Decoder(), [good])
    assert type(record) is not dict and record.d.value == 2.5
