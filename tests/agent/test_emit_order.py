"""Every shape of `emit` call writes exactly what the one rule says, in order.

`emit` has a steady path of its own (one key alone: taken out with `popitem`; several: the
others first, in order, then the last) beside the outbox's checked path (a new key, a number
that is not a plain float, a value that is no finite number). Whichever path a key takes, the
log must read as if each call's keys were written one by one in the order given: a value for
each key whose value `as_number` reads, with the step at the call and one time per call, the
values numbered 1, 2, 3, ... with no gap, and one warning per refused key.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from trainmeter.agent.probes.step_state import state
from trainmeter.emit import as_number, emit

#: Values of every kind a loop hands `emit`: plain floats (the steady path), and what the
#: checked path reads (ints) or refuses (booleans, non-finite floats, an int too large for a
#: float, strings, None).
VALUES: list[Any] = [0.5, -2.25, 1e-300, 3.0, 0.0, 7, -1, True, False, float("inf"),
                     float("-inf"), float("nan"), 10**400, "0.1", None]


def _calls(seed: int, n: int) -> list[tuple[int, dict[str, Any]]]:
    """n calls of 0 to 4 keys drawn from a pool that grows (new keys among known ones), each
    with the step it is made at."""
    rng = random.Random(seed)
    pool = [f"order{seed}_k0"]
    step, calls = 0, []
    for _ in range(n):
        if rng.random() < 0.1:
            pool.append(f"order{seed}_k{len(pool)}")  # a key never seen before
        if rng.random() < 0.3:
            step += rng.randint(1, 3)
        keys = rng.sample(pool, min(len(pool), rng.choice([0, 1, 1, 1, 2, 3, 4])))
        calls.append((step, {k: rng.choice(VALUES) if rng.random() < 0.3 else rng.random()
                             for k in keys}))
    return calls


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_each_call_writes_its_keys_in_the_order_given(
    collector, seed: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(state, "n_steps", 0)
    calls = _calls(seed, 400)
    expected: list[tuple[str, float, int, int]] = []  # key, value, step, call index
    refused: set[str] = set()
    for i, (step, values) in enumerate(calls):
        state.n_steps = step
        assert emit(**values) is None
        for key, value in values.items():
            number = as_number(value)
            if number is None:
                refused.add(key)
            else:
                expected.append((key, number, step, i))
    got = [r for r in collector.records() if r["kind"] == "metric"]
    assert [(r["d"]["key"], r["d"]["value"], r["d"]["step"]) for r in got] == [
        (key, value, step) for key, value, step, _ in expected
    ]
    assert [r["q"] for r in got] == list(range(1, len(expected) + 1))
    # one time per call, and times never go back
    by_call: dict[int, set[float]] = {}
    for r, (*_, i) in zip(got, expected, strict=True):
        by_call.setdefault(i, set()).add(r["t"])
    assert all(len(times) == 1 for times in by_call.values())
    times = [r["t"] for r in got]
    assert times == sorted(times)
    warned = [line for line in capsys.readouterr().err.splitlines() if "skipped" in line]
    assert sorted(warned) == sorted(
        f"trainmeter: emit({key}=...) skipped: not a finite number on the host" for key in refused
    )


def test_a_call_without_keys_writes_nothing_and_raises_nothing(collector) -> None:
    emit(x_first=1.0)
    assert emit() is None
    emit(x_first=2.0)
    got = [r for r in collector.records() if r["kind"] == "metric"]
    assert [(r["d"]["value"], r["q"]) for r in got] == [(1.0, 1), (2.0, 2)]
