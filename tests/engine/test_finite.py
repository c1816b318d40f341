"""`all_finite` answers as the walk does, whatever its C check (`_maybe_not_finite`) saw first.

The check encodes the object as MessagePack and looks for a float's bytes with every exponent
bit set; anything else (those bytes inside a string or another number, a type it cannot encode)
sends it to the walk. So on every object the answer must be the walk's: these build nested
dicts and lists of floats at the edges (the largest finite ones, infinities, NaNs of both signs),
integers, bools, strings holding the very bytes looked for, tuples, float subclasses."""

from __future__ import annotations

import math
import random
import struct
import sys
from typing import Any

import msgspec
import pytest

from trainmeter.engine import finite
from trainmeter.engine.finite import all_finite, finite_only


def _walk(obj: Any) -> bool:
    """The walk alone: the answer `all_finite` gave before its C check."""
    stack = [obj]
    while stack:
        item = stack.pop()
        for value in item.values() if type(item) is dict else item:
            if type(value) is float:
                if not math.isfinite(value):
                    return False
            elif type(value) in (dict, list):
                stack.append(value)
    return True


@pytest.fixture(autouse=True)
def _msgspec_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in a replay, whose decoding imported msgspec: the C check is on (`finite` itself
    never imports it)."""
    monkeypatch.setitem(sys.modules, "msgspec", msgspec)
    monkeypatch.setattr(finite, "_encode", None)
    assert finite._encoder()


class Sub(float):
    """A float subclass (numpy's float64 is one): the walk skips it, msgspec cannot encode it."""


EDGES = [
    0.0, -0.0, 1.0, 1.7976931348623157e308, -1.7976931348623157e308, 5e-324, 1e308,
    math.inf, -math.inf, math.nan, -math.nan, struct.unpack(">d", b"\x7f\xf0\x00\x00\x00\x00\x00\x01")[0],
]
OTHERS = [
    0, 1, -1, 2**63 - 1, 2**64 - 1, 2**70, True, None, "", "\xcb\x7f\xf0", "x" * 40,
    b"\xcb\x7f\xf0", (math.inf,), Sub(math.inf), Sub(1.0),
]


def _build(rng: random.Random, depth: int) -> Any:
    def leaf() -> Any:
        return rng.choice(EDGES) if rng.random() < 0.4 else rng.choice(OTHERS)

    n = rng.randrange(0, 6)
    items = [_build(rng, depth - 1) if depth and rng.random() < 0.3 else leaf() for _ in range(n)]
    if rng.random() < 0.5:
        return items
    return {f"k{i}": v for i, v in enumerate(items)}


def test_the_answer_is_the_walks_on_random_objects() -> None:
    rng = random.Random(30)
    answers = {True: 0, False: 0}
    for _ in range(5000):
        obj = _build(rng, 3)
        want = _walk(obj)
        assert all_finite(obj) is want, obj
        answers[want] += 1
    assert min(answers.values()) > 500  # both answers were asked for


def test_the_bytes_looked_for_anywhere_else_leave_it_to_the_walk() -> None:
    # an int64 whose bytes hold 0xcb 0x7f 0xf0, and one that ends in 0xcb 0x7f (the search
    # must not read past the end), beside finite floats: finite, by the walk
    inside = int.from_bytes(b"\x00\xcb\x7f\xf0\x00\x00\x00\x00", "big")
    at_end = int.from_bytes(b"\x00\x00\x00\x00\x00\x00\xcb\x7f", "big")
    for obj in ({"a": inside, "b": 1.5}, [2.0, at_end], {"s": "\udccb"}, [1.7976931348623157e308]):
        assert finite._maybe_not_finite(obj) in (True, False)
        assert all_finite(obj) is True
    assert finite._maybe_not_finite({"a": inside}) is True  # seen, then the walk decided
    assert finite._maybe_not_finite([1.0, {"x": [0.5, 3.0]}, "text"]) is False


def test_finite_only_still_names_each_replaced_path() -> None:
    snap = {"a": 1.0, "b": {"c": [1.0, math.inf]}, "d": math.nan}
    absent: dict[str, str] = {}
    assert finite_only(snap, absent) == 2
    assert snap == {"a": 1.0, "b": {"c": [1.0, None]}, "d": None}
    assert set(absent) == {"b.c.1", "d"}


def test_a_live_tm_without_msgspec_does_not_import_it_to_check(monkeypatch) -> None:
    """A live `tm` has not imported msgspec: the check walks rather than import it (~19 ms on
    tm's start and on its end after the child's exit), and takes it up once it is imported."""
    monkeypatch.delitem(sys.modules, "msgspec")
    monkeypatch.setattr(finite, "_encode", None)
    assert all_finite({"a": [1.0, 2.0], "b": {"c": 3.0}}) is True
    assert all_finite({"a": [1.0, math.inf]}) is False
    assert "msgspec" not in sys.modules
    assert finite._maybe_not_finite([1.0]) is True  # the walk decides
    monkeypatch.setitem(sys.modules, "msgspec", msgspec)
    assert finite._maybe_not_finite([1.0]) is False  # the C check, now msgspec is there


def test_finite_only_leaves_the_containers_it_was_handed_as_they_were() -> None:
    # a part's entry kept from one snapshot to the next: each snapshot names its infinity
    kept = {"value": None, "range": [math.inf, 2.0]}
    for _ in range(2):
        snap = {"flops_per_token": kept, "steps": 3}
        absent: dict[str, str] = {}
        assert finite_only(snap, absent) == 1
        assert snap == {"flops_per_token": {"value": None, "range": [None, 2.0]}, "steps": 3}
        assert set(absent) == {"flops_per_token.range.0"}
    assert kept == {"value": None, "range": [math.inf, 2.0]}


def test_an_overflowing_flops_per_token_is_named_absent_in_every_snapshot() -> None:
    # The FLOPs per token entry is kept per version of the facts. When finite_only replaced
    # its infinities in place, the next snapshot found None in it and MFU's section raised.
    from . import build as b

    records = [b.start(0.0), b.hello(0.5), b.device(0.6),
               b.fact(0.7, "n_params", 1e308), b.fact(0.7, "seq_len", 1024),
               b.fact(0.7, "n_layers", 12), b.fact(0.7, "d_model", 768),
               b.fact(0.7, "n_embedding_params", 38_000_000)]
    records += [b.step(1.0 + i, tokens=8192, n=i) for i in range(1, 8)]
    engine = b.Engine()
    for record in records:
        engine.feed(record)
    for now in (9.0, 9.5, 10.0):
        snap = engine.snapshot(now=now)
        assert snap["flops_per_token"]["range"] == [None, None]
        assert {"flops_per_token.range.0", "flops_per_token.range.1"} <= set(snap["absent"])
        assert snap["mfu"]["range"] == [None, None]
        sample = engine.sample(now=now)
        assert sample["flops_per_token"] == snap["flops_per_token"]
