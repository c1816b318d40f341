"""Replaying a run's `events.jsonl` through a fresh engine: `tm summary`, and `tm view`.

The log is read in blocks of `BLOCK` bytes (never the whole log), so memory stays flat however
long the run was. Lines that do not parse are skipped and counted with their reason; a log cut
short by a crash (no `run.end`, a truncated last line) still replays. Records go through the
same `Decoder` as the live socket and the same `Recorder` the live run used, with a store that
writes nothing, so the feeding, the error handling and the snapshot are the live run's own
(promise 6, docs/promises.md).

A view that draws the whole run (the dashboard's history) passes `observers`: each gets the
points of the loop's values the engine took (`on_points`, `Engine.take_points`), the engine's
`sample` about every `interval` seconds of the run's own time (`on_snapshot(sample, t)`: the
snapshot's numbers a chart draws, the same values without the parts nothing draws, taken at a
step or GPU sample record, as the live loop would have seen them; at most `max_snapshots`
over the run, no closer than `min_interval_s`), and the final, whole snapshot (`on_finish`). The dashboard's history, the report's charts and the export tables are
all observers of this one replay.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from io import BytesIO
from pathlib import Path
from typing import Any

from .. import payloads
from ..plain import Plain
from . import engine_load as parts
from .decode import Decoder, log_summary
from .observers import ObserverSet
from .recorder import EngineLike, Recorder
from .store import RunStore
from .typed import ENVELOPED, TYPED, typed_many
from .warn import WarnOnce

#: Bytes read at a time: about a hundred records alive at once, whatever the log's size.
BLOCK = 1 << 14
#: Snapshots an observed replay takes along the run, at most (each costs a full snapshot),
MAX_SNAPSHOTS = 2000
#: and no more often than this, in seconds of the run (the live loop's pace).
MIN_INTERVAL_S = 1.0
#: Records at which a snapshot may be taken (they move the step clock or the GPU counters).
_SNAPSHOT_KINDS = frozenset({payloads.STEP.name, payloads.SAMPLE_GPU.name})
#: and the typed records of those kinds (`runlog/typed.py`), told apart by their type alone
_SNAPSHOT_TYPES = frozenset(
    cls for name, cls in {**TYPED, **ENVELOPED}.items() if name in _SNAPSHOT_KINDS
)
#: A line longer than this is not a record (the longest are a few kB): dropped unread up to
#: its newline, so a corrupt log of one endless line cannot fill memory.
MAX_LINE = 8 << 20


class ReplayResult(Plain):
    """What a replay gives: the final snapshot and what was read and skipped. A plain class, as
    the dataclass it replaces was (equal by its fields, mutable): `dataclasses` imports
    `inspect`, ~8 ms of every replay's start (see `plain.py`)."""

    def __init__(
        self,
        snapshot: dict[str, Any],
        lines: int = 0,
        records: int = 0,
        bad: int = 0,
        bad_reasons: dict[str, int] | None = None,
        finished: bool = False,  # a run.end record was seen
        feed_errors: int = 0,
        first_step_t: float | None = None,  # the step clock's first step record (its monotonic t)
        stragglers: Any = None,  # the engine's per-rank waits (engine/stragglers.py), for a job's merge
    ) -> None:
        self.snapshot = snapshot
        self.lines = lines
        self.records = records
        self.bad = bad
        self.bad_reasons: dict[str, int] = {} if bad_reasons is None else bad_reasons
        self.finished = finished
        self.feed_errors = feed_errors
        self.first_step_t = first_step_t
        self.stragglers = stragglers



def replay(
    events: Path,
    engine_factory: Callable[[], EngineLike] | None = None,
    warn: Callable[[str, str], None] | None = None,
    *,
    observers: Iterable[Any] = (),
    max_snapshots: int = MAX_SNAPSHOTS,
    min_interval_s: float = MIN_INTERVAL_S,
    resume: bool = True,
) -> ReplayResult:
    """Stream `events` through a fresh engine; return its final snapshot and what was skipped.

    With the default engine and `resume`, the replay starts from the checkpoint beside the log
    when one can be trusted (`checkpoint.load`) and reads only what follows it, then leaves a
    new checkpoint for the next look; the snapshot is the one a full replay gives."""
    warn = warn or WarnOnce()
    observers = list(observers)
    # a checkpoint keeps the default pacing of snapshots: a replay paced otherwise reads it all
    use_ckpt = resume and engine_factory is None and min_interval_s == MIN_INTERVAL_S
    if use_ckpt:  # a replay of the whole log without one loads neither it nor hashlib
        import hashlib

        from . import checkpoint
    state, hasher = _resumed(events, observers) if use_ckpt else (None, None)
    missing = reason = None
    if state is None:
        hasher = hashlib.sha256() if use_ckpt else None  # the bytes the next checkpoint covers
        if engine_factory is None:
            engine_factory, missing = parts.load_engine_factory(warn)
        engine, reason = parts.make_engine(engine_factory, warn)
        state = _State(engine, Decoder(), _interval(events, max_snapshots, min_interval_s), observers)
    recorder = Recorder(RunStore(warn), warn)
    recorder.attach_engine(state.engine, missing or reason)
    recorder.hello_pids, recorder.observe_only = state.hello_pids, state.observe_only
    recorder.feed_errors = state.feed_errors
    result = ReplayResult(snapshot={}, lines=state.lines)
    decoder = state.decoder
    feed = _Observed(recorder, state.observers, warn, state.interval)
    feed.next_t = state.next_t
    start = state.offset
    # the common kinds read typed for an engine that reads them (`Engine.feed_many`), else dicts
    read = typed_many if hasattr(state.engine, "feed_many") else Decoder.many
    with open(events, "rb") as fh:
        before = checkpoint.stat_key(os.fstat(fh.fileno())) if use_ckpt else None
        fh.seek(start)
        consumed = start  # bytes of the log up to the end of the last whole line read
        rest = b""
        skipping = False  # inside a line too long to be a record: drop bytes up to its newline
        while block := fh.read(BLOCK):
            consumed += len(block)
            data = rest + block
            # each line keeps its newline (the readers strip it); BytesIO finds them with memchr,
            # where bytes.split(b"\n") tests byte by byte (a third of the cost of reading)
            lines = BytesIO(data).readlines()
            rest = b"" if lines[-1][-1:] == b"\n" else lines.pop()  # the next block's start
            if hasher is not None:  # every byte before `rest`, once: what a checkpoint covers
                hasher.update(memoryview(data)[: len(data) - len(rest)])
            if skipping:
                if not lines:
                    if hasher is not None:
                        hasher.update(rest)
                    rest = b""
                    continue
                lines.pop(0)  # the overlong line's tail, counted when it began
                skipping = False
            if len(rest) >= MAX_LINE:
                result.lines += 1
                decoder.skip("line too long")
                if hasher is not None:
                    hasher.update(rest)
                rest, skipping = b"", True
            result.lines += len(lines)
            if lines and max(map(len, lines)) > MAX_LINE:  # a whole overlong line in the block
                kept = [line for line in lines if len(line) <= MAX_LINE]  # (newline included)
                for _ in range(len(lines) - len(kept)):
                    decoder.skip("line too long")
                lines = kept
            feed(read(decoder, lines))
        offset = consumed - len(rest)
        if (use_ckpt and hasher is not None and not skipping and state.engine is not None
                and offset > start):
            state.lines, state.offset, state.next_t = result.lines, offset, feed.next_t
            state.feed_errors = recorder.feed_errors
            state.observers = list(feed.observers.observers)
            after = checkpoint.stat_key(os.fstat(fh.fileno()))
            checkpoint.save(
                events, offset, [_name(o) for o in state.observers], state, hasher.hexdigest(),
                unchanged=after if after == before else None,  # written meanwhile: always hash
            )
        if rest and not skipping:  # a last line without its newline (a crash cut it, or an editor)
            result.lines += 1
            feed(read(decoder, [rest]))
    result.records = decoder.good
    result.bad = decoder.skipped
    result.bad_reasons = dict(decoder.reasons)
    result.finished = decoder.ended
    result.feed_errors = recorder.feed_errors
    clock = getattr(state.engine, "clock", None)
    result.first_step_t = getattr(clock, "first_t", None)
    result.stragglers = getattr(state.engine, "stragglers", None)
    result.snapshot = recorder.snapshot(now=None)
    result.snapshot["log"] = log_summary(result.lines, decoder.good, decoder.reasons)
    feed.finish(result.snapshot)
    return result


class _State:
    """What a replay carries from one line to the next, and a checkpoint keeps."""

    def __init__(self, engine: Any, decoder: Decoder, interval: float, observers: list[Any]):
        self.engine = engine
        self.decoder = decoder
        self.interval = interval
        self.observers = observers
        self.offset = 0  # log bytes covered
        self.lines = 0
        self.next_t: float | None = None
        self.hello_pids: set[int] = set()
        self.observe_only: list[str] = []
        self.feed_errors = 0


def save_finished(events: Path, recorder: Recorder) -> bool:
    """At the end of a run: the live engine's state as the checkpoint of its sealed log."""
    return recorder.sealed and save_live(events, recorder)


def save_live(events: Path, recorder: Recorder) -> bool:
    """The live engine's state as the checkpoint of the log written so far: while the run goes
    (`live_checkpoint.py`), so a `tm` killed outright leaves one, and once the log is sealed.

    The live engine was fed exactly the logged records, in order, each of them a good line
    (`Recorder`), so it is the state a full replay reaches at the same byte; the recorder hashed
    every byte it appended, so the checkpoint covers exactly those. The dashboard's history is
    not kept (the live one is paced by the wall clock, a replay's by the run's records), so the
    first `tm view` replays once and leaves a checkpoint with it. Taken under the recorder's
    lock (nothing half written or fed); the file is written after it is let go."""

    from . import checkpoint

    def freeze() -> tuple[bytes, str, int, list[int]] | None:
        engine, store = recorder.engine, recorder.store
        if engine is None or recorder.log_hash is None or store.broken is not None:
            return None
        store.flush()
        try:
            st = os.stat(events)
        except OSError:
            return None
        if st.st_size != recorder.log_bytes or store.broken is not None:
            return None  # the file is not the bytes this recorder wrote
        decoder = Decoder()
        decoder.lines = decoder.good = recorder.written
        decoder.ended = recorder.sealed
        decoder.t_start = getattr(getattr(engine, "ledger", None), "t_start", None)
        state = _State(engine, decoder, MIN_INTERVAL_S, [])
        state.offset, state.lines = st.st_size, recorder.written
        state.hello_pids, state.observe_only = set(recorder.hello_pids), list(recorder.observe_only)
        state.feed_errors = recorder.feed_errors
        payload = checkpoint.dumps(state)
        if payload is None:
            return None
        return payload, recorder.log_hash.hexdigest(), st.st_size, checkpoint.stat_key(st)

    frozen = recorder.locked(freeze)
    if frozen is None:
        return False
    payload, digest, offset, key = frozen
    # a sealed log is written no more: the next look may skip hashing while it stays so
    return checkpoint.save(events, offset, [], payload, digest, key if recorder.sealed else None)


def _name(obs: Any) -> str:
    return f"{type(obs).__module__}.{type(obs).__qualname__}"


def _resumed(events: Path, observers: list[Any]) -> tuple[_State | None, Any]:
    """The checkpoint's state, with each of `observers` given its saved state, and the hasher
    of the bytes it covers (`checkpoint.load`); (None, None) when there is no trusted
    checkpoint, or it lacks one of them (a view that needs the whole run)."""
    from . import checkpoint

    found = checkpoint.load(events)
    if found is None:
        return None, None
    _, _, state, hasher = found
    if not isinstance(state, _State):
        return None, None
    saved = list(state.observers)
    merged = []
    for obs in observers:
        match = next((s for s in saved if type(s) is type(obs)), None)
        if match is None or not hasattr(obs, "__dict__"):
            return None, None
        saved.remove(match)
        obs.__dict__.clear()
        obs.__dict__.update(match.__dict__)
        merged.append(obs)
    state.observers = merged + saved  # saved views nobody asked for are kept up to date too
    return state, hasher


def _interval(events: Path, max_snapshots: int, min_interval_s: float = MIN_INTERVAL_S) -> float:
    """Seconds of the run between two observed snapshots: at most `max_snapshots` in all."""
    span = _span(events)
    return max(min_interval_s, (span or 0.0) / max(max_snapshots, 1))


def _span(events: Path) -> float | None:
    """Seconds between the log's first and last record, read from its two ends only."""
    try:
        with open(events, "rb") as fh:
            first = json.loads(fh.readline(MAX_LINE) or b"null")
            size = os.fstat(fh.fileno()).st_size
            fh.seek(max(0, size - 65536))
            tail = fh.read().splitlines()
        for line in reversed(tail):
            try:
                return float(json.loads(line)["t"]) - float(first["t"])
            except (ValueError, KeyError, TypeError):
                continue
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return None  # an unreadable end: snapshots are spaced by the floor interval
    return None


class _Observed:
    """Feeds the recorder a block of records at a time, cut where an observer's snapshot is due.

    Without observers a block goes to the recorder whole. With them, each observer gets the
    points of the values the engine took from the block, and a snapshot at the first step or GPU sample record `interval`
    seconds (run time) after the previous one. An observer that raises is dropped with one
    warning, as in a live run.
    """

    def __init__(self, recorder: Recorder, observers: list[Any], warn: Any, interval: float):
        self.recorder = recorder
        self.observers = ObserverSet(observers, warn)
        self.interval = interval
        self.next_t: float | None = None
        self.origin: float | None = None
        engine = recorder.engine
        self.take = getattr(engine, "take_points", None) if observers else None
        if self.take is not None:
            self.take()  # the engine keeps the points from here on

    def __call__(self, pairs: list[tuple[bytes, dict[str, Any]]]) -> None:
        if not self.observers:
            self.recorder.accept_many(pairs)
            return
        start = 0
        kinds, types = _SNAPSHOT_KINDS, _SNAPSHOT_TYPES
        next_t = self.next_t
        for i, (_, record) in enumerate(pairs):
            cls = type(record)
            if cls in types or (cls is dict and record["kind"] in kinds):
                t = record.t if cls in types else record["t"]
                if next_t is None:
                    next_t = t + self.interval
                elif t >= next_t:
                    next_t = t + self.interval
                    self._feed(pairs[start : i + 1])
                    start = i + 1
                    sample = self.recorder.sample(now=t, keys=self.observers.reads())
                    self.observers.snapshot(sample, t)
        self.next_t = next_t
        self._feed(pairs[start:] if start else pairs)

    def _feed(self, pairs: list[tuple[bytes, dict[str, Any]]]) -> None:
        self.recorder.accept_many(pairs)
        if self.take is None:
            return
        points = self.take()
        origin = self.recorder.engine.t0  # type: ignore[union-attr]
        if points or origin != self.origin:
            self.origin = origin
            self.observers.points(points, origin)

    def finish(self, snap: dict[str, Any]) -> None:
        self.observers.finish(snap)

