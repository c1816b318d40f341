"""The decoder's fast path (orjson, many lines a call) takes exactly the lines the standard
library path takes, gives the same records, and counts the same skips with the same reasons.

Each test decodes the same lines twice: once as `tm` does (the fast path where it is sure),
once with the fast parser switched off (every line through `records.decode` and
`plausible.check`), and compares everything the decoder says.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainmeter.runlog import decode
from trainmeter.runlog.decode import Decoder
from trainmeter.runlog.replay import replay

pytest.importorskip("orjson")

HEAD = b'{"v":1,"t":5,"src":"agent","rank":0,"pid":1,'
STEP = HEAD + b'"kind":"step","d":{"k":1,"tokens":8192,"n":1,"micro":1}}'

#: Lines where orjson and the standard library could part ways, or where a rule is tested.
TRICKY = [
    b"",
    b"   ",
    b"not json",
    b"[1,2]",
    b'"a string"',
    HEAD + b'"kind":"step","d":{"k":1,"tokens":18446744073709551616,"n":3}}',  # past 64 bits
    HEAD + b'"kind":"step","d":{"k":1,"tokens":-9223372036854775809,"n":3}}',
    HEAD + b'"kind":"metric","d":{"key":"x","value":123456789012345678901234}}',
    HEAD + b'"kind":"metric","d":{"key":"x","value":1e400}}',  # infinite once parsed
    b'{"v":1,"t":NaN,"src":"agent","rank":0,"pid":1,"kind":"metric","d":{"key":"x","value":1}}',
    b'{"v":1,"t":5,"src":"agent","rank":-1,"pid":1,"kind":"metric","d":{"key":"x","value":1}}',
    b'{"v":true,"t":5,"src":"agent","rank":0,"pid":1,"kind":"metric","d":{"key":"y","value":2}}',
    b'{"v":1.0,"t":5,"src":"agent","rank":0,"pid":1,"kind":"phase","d":{"name":"data","s":-1}}',
    b'{"v":1,"t":5,"src":"agent","rank":true,"pid":1,"kind":"metric","d":{"key":"x","value":1}}',
    b'{"v":1,"t":true,"src":"agent","rank":0,"pid":1,"kind":"metric","d":{"key":"x","value":1}}',
    b'{"v":1,"t":5,"src":"agent","pid":1,"kind":"metric","d":{"key":"no rank","value":1}}',
    HEAD + b'"kind":"step","d":{"k":2000000,"tokens":1}}',
    HEAD + b'"kind":"step","d":{"k":1,"tokens":10,"real_tokens":11}}',
    HEAD + b'"kind":"step","d":{"k":true,"tokens":10}}',
    HEAD + b'"kind":"metric","d":{"key":"z","value":' + b"[" * 990 + b"]" * 990 + b"}}",
    HEAD + b'"kind":"metric","d":{"key":"z","value":' + b"[" * 5000 + b"]" * 5000 + b"}}",
    HEAD + b'"kind":"metric","d":{"key":"\\ud800","value":3}}',  # a lone surrogate
    b"\xff\xfe{}",
    b"\xc2\xa0" + STEP,  # a no-break space before: the standard library strips it
    b"\x1c" + STEP,
    b"\xef\xbb\xbf" + STEP,  # a byte order mark
    HEAD + b'"kind":"fact","d":{"key":"n_params","value":-5}}',
    HEAD + b'"kind":"bogus","d":{}}',
    HEAD + b'"kind":["x"],"d":{}}',
    HEAD + b'"kind":"hello","d":{"world_size":2,"probes":["steps"]}}',
    b'{"v":1,"t":5,"src":"agent","rank":0,"pid":1.5,"kind":"metric","d":{"key":"x","value":1}}',
    STEP + HEAD,  # two records on one line
    STEP + b"\r",
    HEAD + b'"kind":"metric","d":{"key":"a","value":1,"key":"b"}}',  # a repeated key
    b'{"v":1,"t":9,"src":"tm","rank":null,"pid":1,"kind":"run.end","d":{}}',
    STEP,  # after run.end
]


def _decode(lines: list[bytes], fast: bool, **kw) -> tuple:
    with pytest.MonkeyPatch.context() as m:
        if not fast:
            m.setattr(decode, "_fast", False)
        decoder = Decoder(**kw)
        out = decoder.many(lines)
    return out, decoder.lines, decoder.good, decoder.skipped, decoder.reasons, decoder.ended


@pytest.mark.parametrize("from_socket", [False, True])
def test_tricky_lines_decode_the_same_on_both_paths(from_socket: bool) -> None:
    lines = [STEP] * 40 + TRICKY  # enough lines that the fast parser is used
    fast = _decode(lines, True, from_socket=from_socket)
    slow = _decode(lines, False, from_socket=from_socket)
    assert repr(fast) == repr(slow)  # types too: an int that came back a float would show
    assert fast[3] >= 20  # most tricky lines are skipped, each with its reason


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)
_records = st.fixed_dictionaries(
    {
        "v": st.sampled_from([1, 1, 1, 2, True, 1.0]),
        "t": st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(-5, 2**66)),
        "src": st.sampled_from(["agent", "tm"]),
        "rank": st.one_of(st.none(), st.integers(-2, 3), st.booleans()),
        "pid": st.one_of(st.none(), st.integers(-2, 2**65)),
        "kind": st.sampled_from(["step", "metric", "phase", "fact", "hello", "sample.gpu", "x"]),
        "d": st.one_of(
            st.fixed_dictionaries(
                {},
                optional={
                    "k": _scalars,
                    "tokens": _scalars,
                    "real_tokens": _scalars,
                    "n": _scalars,
                    "s": _scalars,
                    "key": st.sampled_from(["n_params", "loss", "dp"]),
                    "value": _values,
                },
            ),
            _values,
        ),
    }
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_records, min_size=1, max_size=40))
def test_random_records_decode_the_same_on_both_paths(recs: list[dict]) -> None:
    lines = [json.dumps(r).encode() for r in recs] + [STEP] * decode.FAST_FROM
    assert repr(_decode(lines, True)) == repr(_decode(lines, False))


def test_replay_is_the_same_on_both_paths(tmp_path: Path, monkeypatch) -> None:
    """A whole log, oddities in the middle and a cut last line: the same snapshot and counts."""
    events = tmp_path / "events.jsonl"
    good = [
        b'{"v":1,"t":0,"src":"tm","rank":null,"pid":1,"kind":"run.start","d":{"argv":[]}}',
        HEAD + b'"kind":"hello","d":{"world_size":1,"probes":["steps"]}}',
    ]
    steps = [
        b'{"v":1,"t":%d.5,"src":"agent","rank":0,"pid":1,"kind":"step","d":{"k":1,"tokens":512,"n":%d}}'
        % (i, i)
        for i in range(1, 400)
    ]
    events.write_bytes(b"\n".join(good + steps[:200] + TRICKY + steps[200:]) + b'\n{"v":1,')
    fast = replay(events)
    monkeypatch.setattr(decode, "_fast", False)
    slow = replay(events)
    assert fast.snapshot == slow.snapshot
    assert (fast.lines, fast.records, fast.bad, fast.bad_reasons, fast.finished) == (
        slow.lines, slow.records, slow.bad, slow.bad_reasons, slow.finished,
    )
    assert fast.bad_reasons.get("after run.end") == 200  # the steps after the run.end line
