"""The one door every record goes through: log first, then the engine, in the same order.

Invariant 6 promises that a replay of `events.jsonl` gives the live run's numbers. That holds only
if the engine is fed exactly the records that were written, in the order they were written, and
in the form a reader parses back. So both the ingest thread (records from the agents) and the
live loop (records `tm` makes) go through `Recorder`, under one lock; `tm`'s own records are
encoded and parsed back before they reach the engine, as a replay would see them.
"""

from __future__ import annotations

import os
import time

# `threading.Lock` itself, without `threading` (~0.5 ms of every replay's start)
from _thread import allocate_lock
from collections.abc import Callable
from typing import Any, Protocol

from .. import payloads, records
from .plausible import Implausible, check
from .store import RunStore

FLUSH_EVERY_S = 1.0


def _sha256() -> Any:
    """The log's running hash. CPython's own SHA-256 (the same digest) where it is built in:
    hashlib would load OpenSSL's library, ~3 ms of every run while the child starts."""
    try:
        from _sha256 import sha256
    except ImportError:  # a build without it (FIPS): hashlib's
        from hashlib import sha256

    return sha256()

_HELLO, _FACT = payloads.HELLO.name, payloads.FACT.name


def no_engine_snapshot(reason: str) -> dict[str, Any]:
    """What stands in for a snapshot when the engine could not be loaded or built."""
    return {"absent": {"engine": reason}, "warnings": [f"no engine: {reason}"]}


class EngineLike(Protocol):
    """What the recorder feeds: `trainmeter.engine.Engine`, loaded late (after the child
    starts), so it is named here by what it does. A record goes socket -> `Ingest` ->
    `decode.Decoder` -> `Recorder.accept` -> the store, then `feed` -> `snapshot`."""

    def feed(self, record: dict[str, Any]) -> None: ...

    def snapshot(self, now: float | None = None) -> dict[str, Any]: ...

    def take_points(self) -> list[tuple[Any, ...]]: ...


class Recorder:
    """Appends records to the store and feeds them to the engine. Never raises."""

    def __init__(self, store: RunStore, warn: Callable[[str, str], None]) -> None:
        self.store = store
        self.warn = warn
        self.pid = os.getpid()
        self.engine: EngineLike | None = None
        self.engine_missing: str | None = None
        self.feed_errors = 0
        self.written = 0
        self.hello_pids: set[int] = set()
        self.observe_only: list[str] = []  # the reasons recorded why no agent reports
        self._before_engine: list[dict[str, Any]] | None = []
        self.sealed = False
        self._last_flush = time.monotonic()
        self._lock = allocate_lock()
        self.observers: Any = None  # an `ObserverSet`: live views given the engine's points
        #: SHA-256 of every byte appended to the log, and their count: what a live checkpoint
        #: covers (`runlog/live_checkpoint.py`); None for a store that writes nothing (a replay)
        self.log_hash: Any = _sha256() if store.path is not None else None
        self.log_bytes = 0
        self._origin: float | None = None  # the run's start as last told to the observers

    # ---- writing ---------------------------------------------------------------------------

    def write_tm(self, kind: payloads.Kind, d: dict[str, Any], t: float | None = None) -> None:
        """A record made by `tm` itself: src "tm", no rank, tm's pid, monotonic time; its
        payload built through its kind's table entry (`payloads`)."""
        try:
            d = kind.build(**d)
            record = records.make(
                kind.name, d, t=time.monotonic() if t is None else t, src="tm", rank=None,
                pid=self.pid,
            )
            if kind.name in ("crash", "fact"):  # redact.FREE_TEXT_KINDS
                from ..redact import scrub_record

                scrub_record(record)  # as a replay of the log will read it
            line = records.encode(record)
            parsed = records.decode(line)  # what a replay will see, tuples turned into lists
            check(parsed)  # a replay skips what cannot be true: so is it never written
        except (records.RecordError, Implausible, TypeError) as exc:
            self.warn(f"encode:{kind.name}", f"a {kind.name} record could not be written ({exc})")
            return
        self.accept(line.encode("utf-8"), parsed)

    def accept(self, line: bytes, record: dict[str, Any]) -> None:
        """A decoded record and the exact line it came from (the ingest thread's entry)."""
        with self._lock:
            if self.sealed:
                return
            self.store.append(line)
            if self.log_hash is not None:
                self.log_hash.update(line)
                self.log_hash.update(b"\n")
                self.log_bytes += len(line) + 1
            self.written += 1
            now = time.monotonic()
            if now - self._last_flush >= FLUSH_EVERY_S:  # even if the live loop is stuck
                self._last_flush = now
                self.store.flush()
            kind = record.get("kind")
            if kind == _HELLO and isinstance(record.get("pid"), int):
                self.hello_pids.add(record["pid"])
            elif kind == _FACT and record["d"].get("key") == "observe_only":
                self.observe_only.append(str(record["d"].get("value")))
            if self._before_engine is not None:
                self._before_engine.append(record)
            else:
                self._feed(record)

    def accept_many(self, pairs: list[tuple[bytes, dict[str, Any]]]) -> None:
        """`accept` for each (line, record) in order, holding the lock once (a replay's block).

        A typed record (`runlog/typed.py`: a step, metric, phase or sampler's reading) is never
        a hello or a fact, so only the dicts among them are looked at one by one."""
        if not pairs:
            return
        with self._lock:
            if self.sealed:
                return
            if self.store.path is not None:
                append, log_hash = self.store.append, self.log_hash
                for line, _ in pairs:
                    append(line)
                    if log_hash is not None:
                        log_hash.update(line)
                        log_hash.update(b"\n")
                        self.log_bytes += len(line) + 1
            records = [record for _, record in pairs]
            engine = self.engine
            direct = self._before_engine is None and engine is not None
            for record in [r for r in records if type(r) is dict]:
                kind = record.get("kind")
                if kind == _HELLO and isinstance(record.get("pid"), int):
                    self.hello_pids.add(record["pid"])
                elif kind == _FACT and record["d"].get("key") == "observe_only":
                    self.observe_only.append(str(record["d"].get("value")))
                if not direct:
                    if self._before_engine is not None:
                        self._before_engine.append(record)
                    else:
                        self._feed(record)
            if direct:
                feed_many = getattr(engine, "feed_many", None)
                try:
                    if feed_many is not None:
                        feed_many(records)
                    else:
                        for record in records:
                            engine.feed(record)  # type: ignore[union-attr]
                except Exception as exc:  # noqa: BLE001 - counted and said as in `_feed`
                    self.feed_errors += 1
                    self.warn("engine.feed", f"the engine failed on a block of records: {exc!r}")
                if self.observers:
                    self._show()
            self.written += len(pairs)
            now = time.monotonic()
            if now - self._last_flush >= FLUSH_EVERY_S:
                self._last_flush = now
                self.store.flush()

    def _feed(self, record: dict[str, Any]) -> None:
        if self.engine is None:
            return
        try:
            self.engine.feed(record)
        except Exception as exc:  # noqa: BLE001 - replay counts the same failures the same way
            self.feed_errors += 1
            self.warn("engine.feed", f"the engine failed on a {record.get('kind')} record: {exc!r}")
        if self.observers:
            self._show()

    def _show(self) -> None:
        """The observers get the points of the values the engine took (its rank rule), and the
        run's start when it is new to them."""
        take = getattr(self.engine, "take_points", None)
        if take is None:
            return
        try:
            points = take()
            origin = self.engine.t0  # type: ignore[union-attr]
        except Exception as exc:  # noqa: BLE001 - counted and said as a feed failure
            self.feed_errors += 1
            self.warn("engine.points", f"the engine's points failed: {exc!r}")
            return
        if points or origin != self._origin:
            self._origin = origin
            self.observers.points(points, origin)

    def attach_engine(self, engine: EngineLike | None, missing: str | None = None) -> bool:
        """Start feeding `engine`, first with everything recorded so far. None: no engine.

        Only the first call counts (False after): a second engine would have missed records.
        """
        with self._lock:
            if self._before_engine is None:
                return False
            self.engine = engine
            self.engine_missing = missing if engine is None else None
            if self.observers and engine is not None and hasattr(engine, "take_points"):
                engine.take_points()  # from the first record on
            backlog, self._before_engine = self._before_engine or [], None
            for record in backlog:
                self._feed(record)
        return True

    @property
    def engine_attached(self) -> bool:
        return self._before_engine is None

    def seal(self) -> None:
        """After `run.end`: nothing more is written or fed, whoever still tries."""
        with self._lock:
            self.sealed = True

    # ---- reading ---------------------------------------------------------------------------

    def snapshot(self, now: float | None = None) -> dict[str, Any]:
        """The engine's snapshot, taken under the lock so no record is half fed."""
        with self._lock:
            if self.engine is None:
                return no_engine_snapshot(self.engine_missing or "the engine is not loaded")
            try:
                snap = self.engine.snapshot(now=now)
            except Exception as exc:  # noqa: BLE001 - a snapshot failing must not stop the log
                self.warn("engine.snapshot", f"the engine's snapshot failed: {exc!r}")
                return no_engine_snapshot(f"the snapshot failed: {exc!r}")
        return snap if isinstance(snap, dict) else no_engine_snapshot("snapshot is not a dict")

    def locked(self, fn: Callable[[], Any]) -> Any:
        """`fn()` with no record half written or fed (a live checkpoint's consistent moment)."""
        with self._lock:
            return fn()

    def sample(
        self, now: float | None = None, keys: frozenset[str] | None = None
    ) -> dict[str, Any]:
        """The engine's `sample` (the snapshot's drawn numbers; `keys`: only those, when the
        readers said which they read), taken under the lock; a whole snapshot from an engine
        that has no `sample`."""
        sample = getattr(self.engine, "sample", None)
        if sample is None:
            return self.snapshot(now)
        with self._lock:
            try:
                snap = sample(now=now) if keys is None else sample(now=now, keys=keys)
            except Exception as exc:  # noqa: BLE001 - as a snapshot's failure
                self.warn("engine.sample", f"the engine's sample failed: {exc!r}")
                return no_engine_snapshot(f"the sample failed: {exc!r}")
        return snap if isinstance(snap, dict) else no_engine_snapshot("sample is not a dict")

    def hello_pid_set(self) -> set[int]:
        with self._lock:
            return set(self.hello_pids)

    def flush(self) -> None:
        with self._lock:
            self._last_flush = time.monotonic()
            self.store.flush()

    def close(self) -> None:
        with self._lock:
            self.store.close_events()
