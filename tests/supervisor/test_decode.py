"""The one decoder (live socket and replay): nothing a line holds raises, every skip is counted,
and records that cannot be true are refused the same way in both places."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainmeter import records
from trainmeter.runlog.decode import Decoder
from trainmeter.runlog.replay import replay
from trainmeter.supervisor.ingest import Ingest, clean_stale_dirs

from .fakes import FakeEngine
from .procs import step_record


def _line(record: dict) -> bytes:
    return records.encode(record).encode()


def _until(predicate, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


# ---- records that cannot be true -------------------------------------------------------------


@pytest.mark.parametrize(
    ("d", "reason"),
    [
        ({"k": 1e30, "tokens": 1, "n": 1, "micro": 1}, "implausible step"),  # 10^30 steps
        ({"k": 1_000_001, "tokens": 1, "n": 1, "micro": 1}, "implausible step"),  # > 10^6
        ({"k": 1, "tokens": 10**12 + 1, "n": 1, "micro": 1}, "implausible step"),  # > 10^12
        ({"k": -1, "tokens": 1, "n": 1, "micro": 1}, "implausible step"),
        ({"k": 1, "tokens": -5, "n": 1, "micro": 1}, "implausible step"),
        ({"k": 1, "tokens": 10, "real_tokens": 11, "n": 1, "micro": 1}, "implausible step"),
    ],
)
def test_impossible_steps_are_skipped_and_counted(d: dict, reason: str) -> None:
    decoder = Decoder()
    good = _line(step_record(1, 1.0))
    bad = _line({**step_record(2, 2.0), "d": d})
    out = list(decoder.lines_of([good, bad, good]))
    assert [line for line, _ in out] == [good, good]
    assert decoder.reasons == {reason: 1} and decoder.skipped == 1


def test_the_limits_themselves_are_believed() -> None:
    """A million steps and 10^12 tokens in one record are the most that is still taken (in a
    run long enough for them: 100 s at the rates `plausible.Ledger` allows)."""
    decoder = Decoder()
    decoder.t_start = 0.0
    line = _line({**step_record(1, 100.0), "d": {"k": 10**6, "tokens": 10**12, "n": 10**6}})
    assert len(list(decoder.lines_of([line]))) == 1 and decoder.skipped == 0


def test_overflowing_and_negative_values() -> None:
    decoder = Decoder()
    metric = b'{"v":1,"t":1,"src":"emit","rank":0,"pid":1,"kind":"metric","d":{"key":"l","value":1e400}}'
    fact = _line(records.make("fact", {"key": "n_params", "value": -7}, t=1.0, src="agent"))
    phase = _line(records.make("phase", {"name": "data", "s": -1.0, "n": 1}, t=1.0, src="agent"))
    rank = _line({**step_record(1, 1.0), "rank": -1})
    before = _line(step_record(1, -5.0))  # monotonic time is never negative
    loss = _line(records.make("metric", {"key": "l", "value": -3.5}, t=1.0, src="emit"))  # fine
    lines = [metric, fact, phase, rank, before, loss]
    assert [r["kind"] for _, r in decoder.lines_of(lines)] == ["metric"]
    assert decoder.reasons == {
        "implausible metric": 1,
        "implausible fact": 1,
        "implausible phase": 1,
        "implausible step": 2,
    }


def test_a_second_run_end_and_what_follows_it_are_skipped() -> None:
    end = _line(records.make("run.end", {"exit_status": 0}, t=5.0, src="tm"))
    forged = _line(records.make("run.end", {"exit_status": 9}, t=6.0, src="agent"))
    decoder = Decoder()
    kept = [r for _, r in decoder.lines_of([end, forged, _line(step_record(1, 7.0))])]
    assert [r["d"]["exit_status"] for r in kept] == [0]
    assert decoder.ended and decoder.reasons == {"after run.end": 2}


def test_from_the_socket_run_start_and_run_end_are_forged() -> None:
    decoder = Decoder(from_socket=True)
    for kind in ("run.start", "run.end"):
        assert decoder.one(_line(records.make(kind, {}, t=1.0, src="agent"))) is None
    assert decoder.reasons == {"forged run.start": 1, "forged run.end": 1}
    assert not decoder.ended


# ---- nothing raises (property tests) ---------------------------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=200), max_size=8))
def test_any_bytes_are_counted_never_raised(chunks: list[bytes]) -> None:
    decoder = Decoder(from_socket=True)
    good = _line(step_record(1, 1.0))
    data = b"\n".join([good, *chunks, good])
    out = list(decoder.datagram(data))
    assert out[0][0] == good and out[-1][0] == good  # the good records around them are kept
    assert decoder.good + decoder.skipped == decoder.lines


@settings(max_examples=200, deadline=None)
@given(
    envelope=st.fixed_dictionaries(
        {},
        optional={
            "v": st.sampled_from([0, 1, 2, "1", None, 1.0]),
            "t": _json,
            "src": _json,
            "rank": _json,
            "pid": _json,
            "kind": st.sampled_from(sorted(records.KINDS)) | st.text(max_size=6),
            "d": _json | st.dictionaries(st.sampled_from(["k", "tokens", "n", "key", "value", "s"]), _json),
        },
    )
)
def test_any_json_record_is_taken_or_counted(envelope: dict) -> None:
    decoder = Decoder(from_socket=True)
    try:
        line = json.dumps(envelope).encode()  # NaN and Infinity are written as such: hostile
    except (ValueError, RecursionError):
        return
    decoder.one(line)
    assert decoder.good + decoder.skipped == 1


@pytest.mark.parametrize("depth", [5000, 100_000])
def test_deep_nesting_is_a_counted_reason(depth: int) -> None:
    decoder = Decoder()
    for opener in (b"[", b'{"a":'):
        assert decoder.one(opener * depth) is None
    assert decoder.skipped == 2 and set(decoder.reasons) <= {"nested too deep", "not JSON"}


# ---- the socket ------------------------------------------------------------------------------


def _collecting(**kwargs) -> tuple[Ingest, list[dict]]:
    got: list[dict] = []
    return Ingest(lambda line, record: got.append(record), **kwargs), got


def test_a_nested_datagram_does_not_stop_the_ingest_thread() -> None:
    """Issue 9: `b"[" * 5000` raised RecursionError, the thread died, every later record was lost."""
    ingest, got = _collecting()
    ingest.start()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.sendto(b"[" * 5000, ingest.path)
            s.sendto(b'{"a":' * 5000, ingest.path)
            for n in range(3):
                s.sendto(_line(step_record(n, float(n))), ingest.path)
        _until(lambda: len(got) == 3)
        assert ingest._thread is not None and ingest._thread.is_alive()
    finally:
        ingest.stop()
    assert ingest.dropped == 2 and ingest.drop_reasons == {"nested too deep": 2}


def test_stop_never_blocks_on_a_full_queue() -> None:
    """The old wake-up `sendto` blocked forever when the queue was full and the thread gone."""
    ingest, _ = _collecting()
    ingest._thread = threading.Thread(target=lambda: None)  # a thread that is already over
    ingest._thread.start()
    ingest._thread.join()
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.setblocking(False)
        try:
            while True:
                s.sendto(_line(step_record(1, 1.0)), ingest.path)
        except BlockingIOError:
            pass  # the queue is full
    stopper = threading.Thread(target=ingest.stop, daemon=True)
    started = time.monotonic()
    stopper.start()
    stopper.join(timeout=10)
    assert not stopper.is_alive(), "Ingest.stop() blocked"
    assert time.monotonic() - started < 5


def test_a_datagram_longer_than_the_buffer_counts_its_lost_lines() -> None:
    """2,000 lines of equal length in one datagram, a 64 KiB receive buffer: the lines that fit
    are kept, and the others are counted one by one (before: the whole cut was one drop)."""
    ingest, got = _collecting(recv_size=64 * 1024)
    lines = [_line(step_record(n, 1.0)) for n in range(10_000, 12_000)]  # all 5 digits: same length
    assert len({len(x) for x in lines}) == 1
    data = b"\n".join(lines)
    ingest.start()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
            s.sendto(data, ingest.path)
            _until(lambda: ingest.datagrams == 1)
            s.sendto(data, ingest.path)  # the buffer has grown: this one arrives whole
            _until(lambda: ingest.datagrams == 2)
    finally:
        ingest.stop()
    kept_first = len(got) - 2000
    assert 0 < kept_first < 2000
    assert ingest.drop_reasons == {"datagram cut": 2000 - kept_first}
    assert [r["d"]["n"] for r in got[kept_first:]] == list(range(10_000, 12_000))


def test_the_default_buffer_takes_a_448_kib_datagram_whole() -> None:
    ingest, got = _collecting()
    lines = [_line({**step_record(n, 1.0), "d": {"k": 1, "tokens": 1, "n": n, "pad": "x" * 50}})
             for n in range(3000)]
    data = b"\n".join(lines)
    assert len(data) > 300_000
    ingest.start()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 2 << 20)
            s.sendto(data, ingest.path)
        _until(lambda: ingest.datagrams == 1)
    finally:
        ingest.stop()
    assert len(got) == 3000 and ingest.dropped == 0


def test_stale_socket_directories_of_a_dead_tm_are_removed(tmp_path: Path) -> None:
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    gone = tmp_path / f"trainmeter-{int(dead.stdout)}-abc"
    alive = tmp_path / f"trainmeter-{__import__('os').getpid()}-def"
    foreign = tmp_path / f"trainmeter-{int(dead.stdout)}-xyz"  # not ours: no socket inside
    huge = tmp_path / f"trainmeter-{10**30}-x"  # a pid no process can have
    huge.mkdir()
    (huge / "ingest.sock").touch()
    elsewhere = tmp_path / f"trainmeter-{int(dead.stdout)}-ns"  # pid gone, socket read
    for d in (gone, alive, foreign, elsewhere):
        d.mkdir()
    for d in (gone, alive):
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.bind(str(d / "ingest.sock"))  # closed at once: nobody reads it
    # a tm in another pid namespace: its pid means nothing here, but its socket is read
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as live:
        live.bind(str(elsewhere / "ingest.sock"))
        assert clean_stale_dirs(str(tmp_path)) == [str(gone)]
    assert not gone.exists() and alive.exists() and foreign.exists() and elsewhere.exists()
    assert huge.exists()


# ---- replay ----------------------------------------------------------------------------------


def test_a_log_cut_mid_line_and_with_garbage_replays_and_says_what_it_skipped(tmp_path: Path) -> None:
    start = records.encode(records.make("run.start", {"argv": ["x"]}, t=0.0, src="tm"))
    steps = [records.encode(step_record(n, 1.0 + n, tokens=100)) for n in range(4)]
    body = "\n".join([start, steps[0], "garbage {", "[" * 5000, steps[1], "\x00\x01", steps[2],
                      records.encode(step_record(9, 9.0, k=10**9)), steps[3]])
    events = tmp_path / "events.jsonl"
    events.write_bytes(body.encode() + b"\n\xff\xfe\n" + steps[3][:25].encode())  # cut mid-line
    result = replay(events, engine_factory=FakeEngine)
    assert result.snapshot["tokens_seen"] == 400  # the 4 good steps x 100 tokens
    assert result.snapshot["log"] == {
        "lines": 11,  # 9 lines, the two bytes that are not UTF-8, the cut line
        "records": 5,
        "skipped": 6,
        "reasons": {"not JSON": 3, "nested too deep": 1, "implausible step": 1, "not UTF-8": 1},
    }


def test_a_line_is_too_long_from_max_line_bytes_on(tmp_path: Path, monkeypatch) -> None:
    """The bound is the line's own bytes, its newline not counted: one byte under it is read
    (and is not JSON), one at it is dropped unread, whether it ends the log or not."""
    from trainmeter.runlog import replay as replay_mod

    monkeypatch.setattr(replay_mod, "MAX_LINE", 1000)
    good = records.encode(step_record(1, 1.0, tokens=7))
    events = tmp_path / "events.jsonl"
    events.write_text(f"{good}\n{'x' * 999}\n{'y' * 1000}\n{good}\n{'z' * 999}")
    assert replay(events, engine_factory=FakeEngine).snapshot["log"] == {
        "lines": 5, "records": 2, "skipped": 3, "reasons": {"not JSON": 2, "line too long": 1},
    }
    events.write_text(f"{good}\n{'z' * 1000}")
    assert replay(events, engine_factory=FakeEngine).snapshot["log"]["reasons"] == {
        "line too long": 1,
    }


def test_an_endless_line_is_skipped_without_reading_it_whole(tmp_path: Path, monkeypatch) -> None:
    from trainmeter.runlog import replay as replay_mod

    monkeypatch.setattr(replay_mod, "MAX_LINE", 1000)
    good = records.encode(step_record(1, 1.0, tokens=7))
    events = tmp_path / "events.jsonl"
    events.write_text(good + "\n" + "x" * 5500 + "\n" + good + "\n" + "y" * 2000)
    result = replay(events, engine_factory=FakeEngine)
    assert result.snapshot["tokens_seen"] == 14
    assert result.snapshot["log"] == {
        "lines": 4, "records": 2, "skipped": 2, "reasons": {"line too long": 2},
    }
