"""`Engine.sample` merges its parts' values by the dict display when no key is given twice
(`snapshot._merged`): the keys in the order they first appear, the first part's value, only the
keys asked for. Held here against the one-key-at-a-time rule (`Section.merge`), on random parts
with and without a key given twice, and on the sample of real runs against the snapshot's order
(the replay's samples are compared byte for byte, so the order matters, not only the values)."""

from __future__ import annotations

import random

import pytest

from trainmeter.engine.section import Section
from trainmeter.engine.snapshot import _merged

from . import build as b
from .test_sample import RUNS, WANTED


def _rule(parts: list[dict], keys: frozenset[str] | None) -> list[tuple[str, object]]:
    whole = Section()
    for values in parts:
        whole.merge(Section(values=values))
    return [(k, v) for k, v in whole.values.items() if keys is None or k in keys]


def test_merged_is_the_merge_rule() -> None:
    for seed in range(400):
        _one_random_merge(seed)


def _one_random_merge(seed: int) -> None:
    rng = random.Random(seed)
    names = [f"k{i}" for i in range(rng.randint(1, 30))]
    parts = []
    for p in range(11):
        chosen = rng.sample(names, rng.randint(0, min(4, len(names))))
        parts.append({k: (p, k, rng.random()) for k in chosen})
    if seed % 2:  # no key twice: the dict display's path
        seen: set[str] = set()
        for values in parts:
            for k in [k for k in values if k in seen]:
                del values[k]
            seen.update(values)
    keys = None if seed % 3 == 0 else frozenset(rng.sample(names, rng.randint(0, len(names))))
    got = _merged(*parts, keys)
    assert list(got.items()) == _rule(parts, keys)
    for values in parts:  # the parts' own dicts are left as they were
        assert all(v[0] == parts.index(values) for v in values.values())


def test_a_key_given_twice_keeps_the_first_parts_value_and_place() -> None:
    parts = [{"a": 1, "b": 2}, {"c": 3, "a": 9}] + [{} for _ in range(9)]
    assert list(_merged(*parts, None).items()) == [("a", 1), ("b", 2), ("c", 3)]
    assert list(_merged(*parts, frozenset({"a", "c"})).items()) == [("a", 1), ("c", 3)]


@pytest.mark.parametrize("name", sorted(RUNS))
def test_the_samples_keys_keep_the_snapshots_order(name: str) -> None:
    engine = b.Engine()
    for i, record in enumerate(RUNS[name]):
        engine.feed(record)
        if i % 7 and i != len(RUNS[name]) - 1:
            continue
        now = record["t"] + 0.1
        snap = engine.snapshot(now=now)
        for keys in (None, WANTED):
            sample = engine.sample(now=now, keys=keys)
            assert list(sample) == [k for k in snap if k in sample], (name, i, keys)


@pytest.mark.parametrize("name", sorted(RUNS))
def test_a_sample_for_the_historys_keys_is_the_whole_sample_cut_to_them(name: str) -> None:
    """The history's keys (`History.reads`: ofu, the ladder, the rows, but not flops_observed,
    mfu_ofu_gap or arithmetic_intensity, which the GPU counters then leave out): the same
    values, in the same order, as the sample of every key cut to them."""
    from trainmeter.views.history import History

    engine = b.Engine()
    for i, record in enumerate(RUNS[name]):
        engine.feed(record)
        if i % 5 and i != len(RUNS[name]) - 1:
            continue
        now = record["t"] + 0.1
        every = engine.sample(now=now)
        some = engine.sample(now=now, keys=History.reads)
        assert repr(some) == repr({k: v for k, v in every.items() if k in History.reads})
