"""The ingest socket: good records reach the sink in order, malformed lines are counted."""

from __future__ import annotations

import json
import os
import socket
import stat
import time

from trainmeter import records
from trainmeter.supervisor.ingest import Ingest

from .procs import step_record


def _collecting() -> tuple[Ingest, list[tuple[bytes, dict]]]:
    got: list[tuple[bytes, dict]] = []
    ingest = Ingest(lambda line, record: got.append((line, record)))
    return ingest, got


def _send(path: str, *datagrams: bytes) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        for datagram in datagrams:
            s.sendto(datagram, path)


def _until(predicate, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_lines_are_split_decoded_and_bad_ones_counted() -> None:
    ingest, got = _collecting()
    ingest.start()
    try:
        good = [records.encode(step_record(n, 10.0 + n)) for n in range(3)]
        _send(
            ingest.path,
            "\n".join(good[:2]).encode(),  # two records in one datagram
            b"{not json}\n" + good[2].encode() + b"\n\n",  # garbage, then a good one
            json.dumps({"v": 2, "t": 1, "kind": "step", "d": {}}).encode(),  # future schema
            b'{"v":1,"t":NaN,"kind":"step","d":{}}',  # NaN is refused
        )
        _until(lambda: ingest.datagrams == 4)
    finally:
        ingest.stop()
    assert [r["d"]["n"] for _, r in got] == [0, 1, 2]
    assert [line for line, _ in got] == [g.encode() for g in good]  # the exact bytes, logged
    assert ingest.received == 3 and ingest.dropped == 3
    assert ingest.drop_reasons == {"not JSON": 1, "schema version 2 is not 1": 1, "NaN is not a number a record may hold": 1}


def test_directory_is_0700_and_removed_on_stop() -> None:
    ingest, _ = _collecting()
    mode = stat.S_IMODE(os.stat(ingest.dir).st_mode)
    assert mode == 0o700
    assert stat.S_ISSOCK(os.stat(ingest.path).st_mode)
    ingest.start()
    ingest.stop()
    assert not os.path.exists(ingest.dir)


def test_receive_buffer_is_raised_above_the_default() -> None:
    ingest, _ = _collecting()
    try:
        plain = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        default = plain.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        plain.close()
        assert ingest.rcvbuf >= default
        assert ingest.rcvbuf > 200_000 or ingest.rcvbuf == default  # capped by rmem_max
    finally:
        ingest.stop()


def test_datagrams_queued_before_stop_are_kept() -> None:
    """Records the child sent just before it exited are in the kernel queue: stop() takes them
    even when the thread never started (the worst case of a race at the end)."""
    ingest, got = _collecting()
    lines = [records.encode(step_record(n, float(n))) for n in range(50)]
    # 5 datagrams of 10 records: the kernel queues only a few datagrams (max_dgram_qlen)
    _send(ingest.path, *("\n".join(lines[i : i + 10]).encode() for i in range(0, 50, 10)))
    ingest.stop()
    assert [r["d"]["n"] for _, r in got] == list(range(50))


def test_a_burst_of_batched_datagrams_is_not_lost() -> None:
    """2000 datagrams of 20 records each, as fast as one sender can go: every record arrives
    (the sender retries on a full queue like the agent's, so a loss would be the receiver's)."""
    ingest, got = _collecting()
    ingest.start()
    n_dgrams, per = 2000, 20
    # Times on the monotonic clock, up to now: a live record from past the present (and a minute)
    # is refused, so `t=i` failed on a machine up for less than 2000 s.
    now = time.monotonic()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.setblocking(False)
            for i in range(n_dgrams):
                t = now * i / n_dgrams
                body = "\n".join(
                    records.encode(step_record(i * per + j, t)) for j in range(per)
                ).encode()
                while True:
                    try:
                        s.sendto(body, ingest.path)
                        break
                    except BlockingIOError:
                        time.sleep(0.0005)
        _until(lambda: ingest.received == n_dgrams * per, timeout=120)
    finally:
        ingest.stop()
    assert ingest.dropped == 0
    assert [r["d"]["n"] for _, r in got] == list(range(n_dgrams * per))


def test_a_sink_that_raises_does_not_stop_the_thread() -> None:
    seen: list[int] = []

    def sink(_line: bytes, record: dict) -> None:
        seen.append(record["d"]["n"])
        if record["d"]["n"] == 0:
            raise RuntimeError("boom")

    ingest = Ingest(sink)
    ingest.start()
    try:
        _send(ingest.path, records.encode(step_record(0, 1.0)).encode())
        _send(ingest.path, records.encode(step_record(1, 2.0)).encode())
        _until(lambda: len(seen) == 2)
    finally:
        ingest.stop()
    assert seen == [0, 1]


def test_a_values_datagram_is_formatted_and_a_damaged_one_counted() -> None:
    """The ring's slots as the agent ships them become metric records with their number; a
    datagram that names a key it never sent is counted by the values it held, not trusted."""
    from trainmeter.agent import outbox
    from trainmeter.agent import ring as layout

    ingest, got = _collecting()
    try:
        entry = b"emit\x00loss"
        head = outbox.VALUES_HEAD.pack(4242, 0, 1, 2, 0, 1)
        slots = layout.SLOT.pack(0, 7, 12.5, 0.25, 1) + layout.SLOT.pack(0, -1, 13.0, 0.5, 2)
        ingest.handle(outbox.VALUES_MAGIC + head + layout.KEY_LEN.pack(len(entry)) + entry + slots)
        assert [(r["kind"], r["d"]["key"], r["d"]["value"], r["q"]) for _, r in got] == [
            ("metric", "loss", 0.25, 1),
            ("metric", "loss", 0.5, 2),
        ]
        assert got[0][1]["d"]["step"] == 7 and "step" not in got[1][1]["d"]
        assert got[0][1]["src"] == "emit" and got[0][1]["pid"] == 4242
        orphan = outbox.VALUES_HEAD.pack(4243, 0, 1, 3, 5, 0)  # key entries 0..4 never came
        ingest.handle(outbox.VALUES_MAGIC + orphan + slots + slots[:36])
        assert len(got) == 2
        assert ingest.drop_reasons == {"values datagram unreadable": 3}
    finally:
        ingest.stop()
