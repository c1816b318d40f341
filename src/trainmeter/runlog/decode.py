"""Lines to records: the one decoder that both the live socket and a replay of the log use.

A line from the socket and the same line read back from `events.jsonl` must be treated the same
way, or a replay would not give the live run's numbers. So `Decoder` is the only place where
`tm` turns bytes into records: it parses each line with `records.decode` (the wire schema),
then asks `plausible.check` whether the record can be true, and yields the good ones with their
exact bytes. Whatever a line holds (not JSON, nested 5000 deep, a forged step of 10^30, a
second `run.end`), it is skipped and counted by its reason; nothing a line holds can raise out
of this loop, so no input can stop the ingest thread or `tm summary`.

Speed (a replay reads millions of lines): `tm` parses with orjson when it is installed (the
agent and `records.py` stay standard library), many lines per call, and checks the common
records with a few type tests. That fast path only ever *accepts*: a line it is not sure of
goes through the standard-library path above, which decides and names the reason, so both
paths take the same lines and count the same skips. It is sure only where the two parsers give
the same record: orjson refuses NaN, infinities and numbers that overflow (the slow path then
refuses them with its own reason); it would read an integer beyond 64 bits as a float, so a
chunk with 19 digits in a row goes line by line and such a line takes the slow path; and it
parses 1024 levels deep where the standard library stops somewhat sooner, so a line long enough
to hold that many brackets and holding that many takes the slow path.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator

from .. import payloads, records
from .plausible import (
    BEFORE_START_S,
    MAX_KEY_CHARS,
    MAX_RANKS,
    MAX_RUN_S,
    MAX_STEPS_PER_RECORD,
    MAX_TOKENS_PER_RECORD,
    Implausible,
    Ledger,
    check,
    forged,
    in_run,
)

TYPE_CHECKING = False  # typing costs milliseconds before the child starts
if TYPE_CHECKING:
    from typing import Any

#: (loads, its error) once orjson is loaded; False when it is not installed (the standard
#: library alone is still exact). Loaded on the first batch of `FAST_FROM` lines or more: its
#: import costs several milliseconds (it pulls in `dataclasses`), which a short run under `tm`
#: must not pay before its child starts, and a few lines parse as fast either way.
_fast: Any = None
FAST_FROM = 32


def _fast_parser() -> Any:
    global _fast
    if _fast is None:
        try:
            from orjson import JSONDecodeError, loads
        except ImportError:  # pragma: no cover - orjson is a dependency
            _fast = False
        else:
            _fast = (loads, JSONDecodeError)
    return _fast

#: Kinds only `tm` itself writes: from the socket they are forged, or a bug (`plausible.forged`
#: names every record a training process cannot send).
_STEP, _METRIC, _PHASE = payloads.STEP.name, payloads.METRIC.name, payloads.PHASE.name
_START, _END = payloads.RUN_START.name, payloads.RUN_END.name
TM_ONLY = frozenset({_START, _END})
#: Kinds whose every record takes the standard-library path (rare ones with more to do there:
#: a run's start, and the free text of crashes and facts, redacted before it is recorded).
#: (`redact.FREE_TEXT_KINDS`; `redact` itself, slow to import, is loaded at the first of them.)
FREE_TEXT_KINDS = frozenset({payloads.CRASH.name, payloads.FACT.name})
_SLOW_KINDS = frozenset({_START}) | FREE_TEXT_KINDS
#: Kinds the run's time bounds (`plausible.Ledger`).
_LEDGER_KINDS = frozenset({_STEP, _PHASE, payloads.COMM.name, payloads.CRASH.name})

#: How far past the present a record arriving live may say it was made.
LIVE_AHEAD_S = 5.0

#: Lines parsed per call of the fast parser.
CHUNK = 256

# Digits to "0", everything else to " ": 19 zeros in a row then mean a number orjson could
# read differently from the standard library (an integer past 64 bits becomes a float).
_DIGIT_MAP = bytes(48 if 48 <= c <= 57 else 32 for c in range(256))
_LONG_NUMBER = b"0" * 19
_INF = float("inf")
#: A line shorter than this cannot nest deep enough to matter (each level takes two bytes).
_SHORT = 1000
#: Opening brackets a longer line may hold and still take the fast path.
_FEW_BRACKETS = 400
#: step fields: the upper bound `plausible` puts on each (all are also never negative).
_STEP_LIMITS = (
    ("k", MAX_STEPS_PER_RECORD),
    ("tokens", MAX_TOKENS_PER_RECORD),
    ("real_tokens", MAX_TOKENS_PER_RECORD),
    ("n", _INF),
    ("micro", _INF),
)
_KINDS = records.KINDS


def reason_of(exc: BaseException) -> str:
    """The reason a line was skipped: the error message's first part ("not JSON", ...)."""
    if isinstance(exc, RecursionError):
        return "nested too deep"
    if isinstance(exc, (records.RecordError, Implausible)):
        return str(exc).split(":", 1)[0]
    return f"undecodable ({type(exc).__name__})"


def _other_ok(record: dict[str, Any]) -> bool:
    """The plausibility rules themselves, for the rarer kinds (facts, hello, alerts...)."""
    try:
        check(record)
    except Exception:  # noqa: BLE001 - not sure: the slow path decides and counts
        return False
    return True


_NUMBER = frozenset({int, float})
#: Kinds whose `d` has no rule beyond the envelope (`step`, `metric` and `phase`, the common
#: ones, have theirs written out in `_sure`; the other kinds go through `_other_ok`).
_ENVELOPE_ONLY = frozenset(
    {payloads.SAMPLE_GPU.name, payloads.SAMPLE_HOST.name, payloads.SAMPLE_NODE.name}
)


def _sure(record: Any) -> bool:
    """True only when `records.validate` and `plausible.check` would both accept `record`, a
    value orjson parsed (so every float in it is finite and every integer fits 64 bits).
    False means "not sure": the caller takes the standard-library path, which decides."""
    try:  # a record without one of these keys, or not an object at all: not sure
        if record["v"] != records.VERSION:
            return False
        t, d, kind = record["t"], record["d"], record["kind"]
        rank, pid = record["rank"], record["pid"]
    except (KeyError, TypeError, IndexError):
        return False
    if type(t) not in _NUMBER or type(d) is not dict or type(kind) is not str:
        return False
    if t < 0:  # plausible.check refuses a negative time
        return False
    if rank is not None and (type(rank) is not int or not 0 <= rank <= MAX_RANKS):
        return False
    if pid is not None and (type(pid) is not int or pid < 0):
        return False
    if kind == _STEP:  # a third of a log: its rules written out
        for name, high in _STEP_LIMITS:
            value = d.get(name)
            if value is not None and (type(value) is not int or not 0 <= value <= high):
                return False  # counts are whole numbers (`plausible._whole`)
        tokens, real = d.get("tokens"), d.get("real_tokens")
        return tokens is None or real is None or real <= tokens
    if kind == _METRIC:
        key = d.get("key")
        return type(key) is str and len(key) <= MAX_KEY_CHARS
    if kind == _PHASE:
        for name in ("s", "n"):
            value = d.get(name)
            if value is not None and (type(value) not in _NUMBER or value < 0):
                return False
        return True
    if kind in _ENVELOPE_ONLY:
        return True
    return kind in records.KINDS and _other_ok(record)  # an unknown kind: not sure


def _shallow(line: bytes) -> bool:
    """Too few brackets to nest as deep as the standard library refuses."""
    return len(line) < _SHORT or line.count(b"[") + line.count(b"{") < _FEW_BRACKETS


def _parsed(lines: list[bytes], fast: Any) -> list[Any]:
    """orjson's value for each line, or None where the slow path must decide."""
    _fast_loads, _FastError = fast
    if (
        max(map(len, lines)) < _SHORT
        and _LONG_NUMBER not in b"\n".join(lines).translate(_DIGIT_MAP)
    ):
        try:
            return list(map(_fast_loads, lines))
        except _FastError:
            pass
    out: list[Any] = []
    for line in lines:
        if not _shallow(line) or _LONG_NUMBER in line.translate(_DIGIT_MAP):
            out.append(None)
            continue
        try:
            out.append(_fast_loads(line))
        except _FastError:
            out.append(None)
    return out


class Decoder:
    """Decodes lines and counts what it skips. One per socket, one per replay.

    `from_socket`: the lines come from the training processes, which never write `run.start`
    or `run.end` (only `tm` does); in a log, a second `run.end` or anything after it is skipped.
    """

    def __init__(self, *, from_socket: bool = False) -> None:
        self.from_socket = from_socket
        self.lines = 0  # non-blank lines seen
        self.good = 0
        self.skipped = 0
        self.reasons: dict[str, int] = {}
        self.ended = False  # a run.end was accepted
        #: the run's start (a replay: its run.start; live: set by `tm`), to place steps in it
        self.t_start: float | None = None
        #: what each process did so far: steps, tokens and phase time bounded by the time since
        self.ledger = Ledger()

    def skip(self, reason: str, n: int = 1) -> None:
        """Count `n` lines skipped for `reason` (also used for lines lost before decoding)."""
        self.skipped += n
        self.reasons[reason] = self.reasons.get(reason, 0) + n

    def one(self, line: bytes) -> dict[str, Any] | None:
        """The record on one stripped, non-blank line, or None (counted). Never raises.

        The standard-library path: the reference the fast path agrees with."""
        taken = self._take(line)
        return None if taken is None else taken[1]

    def _take(self, line: bytes) -> tuple[bytes, dict[str, Any]] | None:
        """(the line as it is recorded, the record), or None (counted). A record with free
        text (`redact.scrub_record`) is recorded redacted: its line is written anew."""
        self.lines += 1
        try:
            record = records.decode(line)
            kind = record["kind"]
            if self.ended:
                raise Implausible(f"after run.end: a {kind} record")
            if self.from_socket:
                why = forged(record)
                if why is not None:
                    raise Implausible(why)
            check(record)
            if kind != _START:
                in_run(kind, record["t"], self.t_start, self._horizon())
            if kind in _LEDGER_KINDS:
                self.ledger.admit(record, self.t_start)
        except Exception as exc:  # noqa: BLE001 - any input at all is counted, never raised
            self.skip(reason_of(exc))
            return None
        if kind == _END:
            self.ended = True
        elif kind == _START and self.t_start is None:
            self.t_start = record["t"]
        elif kind in FREE_TEXT_KINDS:
            from ..redact import scrub_record

            if scrub_record(record):
                line = records.encode(record).encode("utf-8")
        self.good += 1
        return line, record

    def many(self, raw: list[bytes]) -> list[tuple[bytes, dict[str, Any]]]:
        """(exact line, record) for each good line of `raw` (lines with or without their
        newline; blank ones are passed over). Never raises."""
        lines = [line for line in map(bytes.strip, raw) if line]
        if not lines:
            return []
        fast = _fast_parser() if len(lines) >= FAST_FROM or _fast is not None else False
        if not fast:
            take = self._take
            return [pair for line in lines if (pair := take(line)) is not None]
        out: list[tuple[bytes, dict[str, Any]]] = []
        append = out.append
        take = self._take
        horizon = self._horizon()
        low, high = self._window(horizon)
        admit = self.ledger.admit
        from_socket = self.from_socket
        for start in range(0, len(lines), CHUNK):
            chunk = lines[start : start + CHUNK]
            for line, record in zip(chunk, _parsed(chunk, fast), strict=True):
                if (
                    record is None
                    or self.ended
                    or not _sure(record)
                    or (from_socket and forged(record) is not None)
                    or not low <= record["t"] <= high
                    or record["kind"] in _SLOW_KINDS
                ):
                    pair = take(line)
                    if pair is not None:
                        append(pair)
                        if pair[1]["kind"] == _START:  # the window is known from here on
                            low, high = self._window(horizon)
                    continue
                self.lines += 1
                if record["kind"] in _LEDGER_KINDS:
                    try:
                        admit(record, self.t_start)
                    except Implausible as exc:
                        self.skip(reason_of(exc))
                        continue
                self.good += 1
                if record["kind"] == _END:
                    self.ended = True
                append((line, record))
        return out

    def _window(self, horizon: float) -> tuple[float, float]:
        """The times a record of this run can carry (what `plausible.in_run` allows)."""
        if self.t_start is None:
            return -_INF, horizon
        return self.t_start - BEFORE_START_S, min(horizon, self.t_start + MAX_RUN_S)

    def _horizon(self) -> float:
        """The latest time a record can carry: now (and a few seconds) for one arriving live.
        (A record says when it was made, before it was sent: a later time is made up, and
        would buy it budget in the `Ledger`.)"""
        return time.monotonic() + LIVE_AHEAD_S if self.from_socket else _INF

    def lines_of(self, chunks: Iterable[bytes]) -> Iterator[tuple[bytes, dict[str, Any]]]:
        """(exact line, record) for each good line of `chunks` (lines, or a datagram's split)."""
        batch: list[bytes] = []
        for raw in chunks:
            batch.append(raw)
            if len(batch) >= CHUNK:
                yield from self.many(batch)
                batch = []
        if batch:
            yield from self.many(batch)

    def datagram(self, data: bytes) -> Iterator[tuple[bytes, dict[str, Any]]]:
        """The records in one datagram: several lines joined by newlines."""
        return iter(self.many(data.split(b"\n")))


def log_summary(lines: int, records_: int, reasons: dict[str, int]) -> dict[str, Any]:
    """The snapshot's `log` key: the log's lines, the records taken, what was skipped and why.

    A live run writes only good records (its skipped count is 0: what the socket refused is
    the fact `ingest_dropped`); a replay reports the lines it could not take.
    """
    return {
        "lines": lines,
        "records": records_,
        "skipped": sum(reasons.values()),
        "reasons": dict(reasons),
    }
