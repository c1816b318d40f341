"""One rule for "a finite number or None", and one dotted-path reader, for every reader of a
snapshot; the two helpers that let NaN and infinity through (runs, replay_many) now use it."""

from __future__ import annotations

import math

import pytest

from trainmeter.snapread import finite, finite_value, get, get_dict, get_number


@pytest.mark.parametrize(
    ("value", "expected"),
    [(3, 3.0), (2.5, 2.5), (-1, -1.0), (0, 0.0), (True, None), (None, None), ("4", None),
     (math.nan, None), (math.inf, None), (-math.inf, None), (10**400, None), ([1], None)],
)
def test_finite_is_a_finite_int_or_float_and_nothing_else(value, expected) -> None:
    assert finite(value) == expected


def test_finite_value_looks_inside_a_number_with_its_provenance() -> None:
    assert finite_value({"value": 0.38, "source": "detected"}) == 0.38
    assert finite_value({"value": math.nan}) is None and finite_value({}) is None
    assert finite_value(7) == 7.0


def test_get_walks_a_dotted_path_and_never_raises() -> None:
    snap = {"mfu": {"value": 0.42, "convention": "hf"}, "time": {"goodput": None}, "steps": 9}
    assert get(snap, "mfu.value") == 0.42 and get(snap, "mfu.convention") == "hf"
    assert get(snap, "steps") == 9 and get(snap, "time.goodput") is None
    assert get(snap, "mfu.value.deeper") is None  # a number has no keys
    assert get(snap, "nothing.here", "n/a") == "n/a" and get(None, "mfu") is None
    assert get_number(snap, "mfu.value") == 0.42 and get_number(snap, "mfu.convention") is None


def test_get_dict_is_the_object_at_a_path_or_none() -> None:
    snap = {"run": {"name": "r", "argv": ["a"]}, "mfu": 0.4, "time": {}, "node": {"cpu": None}}
    assert get_dict(snap, "run") == {"name": "r", "argv": ["a"]}
    assert get_dict(snap, "time") == {}  # an empty object is still an object
    assert get_dict(snap, "mfu") is None  # a number where an object was expected
    assert get_dict(snap, "run.argv") is None and get_dict(snap, "node.cpu") is None
    assert get_dict(snap, "missing") is None and get_dict(None, "run") is None


def test_the_run_list_and_the_node_merge_no_longer_pass_nan_through() -> None:
    from trainmeter.runlog import replay_many, runs

    assert runs._number({"value": math.nan}) is None and runs._number(math.inf) is None
    assert replay_many._num(math.nan) is None
    # a node reporting NaN tokens/s makes the job's sum unknown, not NaN
    assert replay_many._sum([{"x": 1.0}, {"x": math.nan}], lambda s: s["x"]) is None
