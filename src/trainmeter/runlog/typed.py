"""Typed decoding of the common record kinds, for a replay: a line straight into the record the
engine reads, checked as it is parsed.

A log is nine tenths `step`, `metric` and `phase` records. Parsing each into dicts, then checking
every field with Python type tests (`decode._sure`), then reading them back with `dict.get` in
the engine, was most of a replay's cost per record. Here msgspec parses such a line into a
`Struct` made from the kind's fields in `payloads.py`, with the plausibility bounds of
`plausible.py` as constraints (a count whole, at least 0 and at most its limit; every number
finite; `t` not negative; rank and pid whole and in range; a key's length; no field the kind
does not have), counted in the decoder's `Ledger` in their place (`plausible.Ledger`), and the
engine reads the fields as attributes (`Engine.feed_many`, through the same handlers as a
dict). The samplers' readings (`sample.gpu`, `sample.host`, `sample.node`, whose payload has
no rule past the envelope) are read the same way with `d` a dict: a block of the log then goes
to the decoder only for its rare kinds, not every few lines for a reading that failed to parse
typed. Like the decoder's other fast path it only ever *accepts*: a line it is not sure of (any
other kind, a field of another type, a bound crossed, a line long enough to nest deep) goes to
`Decoder.many`, which decides and names the reason, so both paths take the same lines and count
the same skips. msgspec is a dependency of `tm` (never of the agent); without it a replay reads
every line the other way.
"""

# No `from __future__ import annotations`: msgspec reads the structs' annotations, and would
# evaluate each one given as a string anew for every struct that inherits it.

import functools
import operator
import sys
from typing import Annotated, Any, ClassVar, Literal

from .. import payloads
from .decode import (
    _ENVELOPE_ONLY,
    _LEDGER_KINDS,
    _SHORT,
    BEFORE_START_S,
    FAST_FROM,
    MAX_RUN_S,
    Decoder,
    _fast_parser,
    reason_of,
)
from .plausible import (
    BUDGET_SLACK_S,
    MAX_EVENTS_PER_S,
    MAX_KEY_CHARS,
    MAX_RANKS,
    MAX_STEPS_PER_RECORD,
    MAX_STEPS_PER_S,
    MAX_TOKENS_PER_RECORD,
    MAX_TOKENS_PER_S,
    Implausible,
    Ledger,
)


def _import_msgspec() -> Any:
    """msgspec, imported without `typing_extensions` when nothing has imported that yet.

    msgspec's first import tries `typing_extensions` (its `get_type_hints`, and TypedDict's
    `Required`) and falls back on `typing` without it; the structs here need neither. On a
    replay's path it cost ~12M instructions (~3 ms) of its ~240M of imports, the `inspect` it
    pulls in aside. The module table is left as it was found, so a later import of
    typing_extensions is unaffected; a msgspec that cannot do without it is imported again."""
    if "typing_extensions" in sys.modules or "msgspec" in sys.modules:
        import msgspec

        return msgspec
    sys.modules["typing_extensions"] = None  # type: ignore[assignment]  # an ImportError to import
    try:
        import msgspec
    except ImportError:
        msgspec = None
    finally:
        if sys.modules.get("typing_extensions", 0) is None:
            del sys.modules["typing_extensions"]
    if msgspec is None:
        for name in [m for m in sys.modules if m == "msgspec" or m.startswith("msgspec.")]:
            del sys.modules[name]
        import msgspec
    return msgspec


try:
    msgspec = _import_msgspec()
    from msgspec import Meta
except ImportError:  # pragma: no cover - msgspec is a dependency of tm
    msgspec = None

_MAX_FLOAT = 1.7976931348623157e308
_LEDGERED = _LEDGER_KINDS  # the kinds the decoder's `Ledger` counts
_INF = float("inf")

if msgspec is not None:
    _Whole = Annotated[int, Meta(ge=0)]
    _Finite = Annotated[float, Meta(ge=-_MAX_FLOAT, le=_MAX_FLOAT)]
    _NotNegative = _Whole | Annotated[float, Meta(ge=0.0, le=_MAX_FLOAT)]
    _Number = int | _Finite

    def _count(limit: float) -> Any:
        return _Whole if limit == _INF else Annotated[int, Meta(ge=0, le=int(limit))]

    #: Each typed kind's field types and bounds; the fields themselves are the table's
    #: (`payloads.py`), checked in `_payload` (a field the table has and this does not is Any).
    _TYPES: dict[str, dict[str, Any]] = {
        payloads.STEP.name: {
            "k": _count(MAX_STEPS_PER_RECORD),
            "n": _count(_INF),
            "tokens": _count(MAX_TOKENS_PER_RECORD),
            "real_tokens": _count(MAX_TOKENS_PER_RECORD),
            "micro": _count(_INF),
            "recovered": bool,
        },
        payloads.METRIC.name: {
            "key": Annotated[str, Meta(max_length=MAX_KEY_CHARS)],
            "value": _Number, "via": str, "step": int, "recovered": bool,
        },
        payloads.PHASE.name: {"name": str, "s": _NotNegative, "n": _NotNegative},
    }

    class _Fields(msgspec.Struct, forbid_unknown_fields=True, gc=False):
        """A payload read as a record is: `d.get(name)` as well as `d.name`."""

        def get(self, name: str, default: Any = None) -> Any:
            value = getattr(self, name, default)
            return default if value is None else value

        def __getitem__(self, name: str) -> Any:
            return getattr(self, name)

    class _Typed(msgspec.Struct, tag_field="kind", forbid_unknown_fields=True, gc=False):
        """The envelope (`records.py`), read as a record is: `record["t"]`, `record.get(...)`."""

        v: Literal[1]
        t: _Whole | Annotated[float, Meta(ge=0.0, le=_MAX_FLOAT)]
        d: Any
        src: str | None = None
        rank: Annotated[int, Meta(ge=0, le=MAX_RANKS)] | None = None
        pid: _Whole | None = None
        q: int | None = None
        r: int | None = None
        recovered: bool | None = None
        kind: ClassVar[str]

        def get(self, name: str, default: Any = None) -> Any:
            value = getattr(self, name, default)
            return default if value is None else value

        def __getitem__(self, name: str) -> Any:
            return getattr(self, name)

    def _payload(kind: payloads.Kind) -> type:
        types = _TYPES[kind.name]
        return msgspec.defstruct(
            f"{kind.name.title()}Fields",
            [(name, types.get(name, Any) | None, None) for name in kind.fields],
            bases=(_Fields,),
            kw_only=True,
        )

    def _record(kind: payloads.Kind) -> type:
        return msgspec.defstruct(
            f"{kind.name.title()}Record",
            [("d", _payload(kind)), ("kind", ClassVar[str], kind.name)],
            bases=(_Typed,),
            tag=kind.name,
            kw_only=True,
        )

    def _enveloped(kind: payloads.Kind) -> type:
        """A kind whose payload has no rule past the envelope (the samplers' readings): `d`
        read as the dict the engine's handler takes. msgspec refuses a number out of a
        float's range (JSON's 1e400), so every number in it is finite, as `plausible` asks."""
        return msgspec.defstruct(
            f"{kind.name.title().replace('.', '')}Record",
            [("d", dict[str, Any]), ("kind", ClassVar[str], kind.name)],
            bases=(_Typed,),
            tag=kind.name,
            kw_only=True,
        )

    TYPED = {name: _record(payloads.KINDS[name]) for name in _TYPES}
    #: the kinds read with their envelope typed and `d` a dict (`decode._ENVELOPE_ONLY`)
    ENVELOPED = {name: _enveloped(payloads.KINDS[name]) for name in sorted(_ENVELOPE_ONLY)}
    _DECODE = msgspec.json.Decoder(
        functools.reduce(operator.or_, [*TYPED.values(), *ENVELOPED.values()])
    ).decode
    _ERRORS = (msgspec.DecodeError, msgspec.ValidationError)
    _STEP = TYPED[payloads.STEP.name]
    _PHASE = TYPED[payloads.PHASE.name]
else:  # pragma: no cover
    TYPED = {}
    ENVELOPED = {}


def typed_many(decoder: Decoder, raw: list[bytes]) -> list[tuple[bytes, Any]]:
    """`decoder.many(raw)`, with the lines of the common kinds read typed: (exact line, record)
    for each good line, in order; the others go through `decoder.many`, which decides. A typed
    step or phase is counted in the decoder's `Ledger` (the time since `run.start` bounds what a
    process did) in its place in the log, as the decoder counts its own.

    The `Ledger`'s `step` and `phase` cost ~3.1k-3.6k instructions a call, a third of a typed
    step's or phase's whole cost, so a record of a process (and phase) the `Ledger` has counted
    is counted here: its counters (the `Ledger`'s own lists, looked up as it does) take the
    record in place when it is within its budget, with `step`'s and `phase`'s arithmetic (a
    typed field is a number or None where they test its type). Anything else (a process or a
    phase not counted yet, a budget crossed, no `run.start`) calls the `Ledger`, which decides
    and names the reason."""
    if not TYPED or decoder.from_socket or decoder.ended:  # (after run.end: all refused)
        return decoder.many(raw)
    out: list[tuple[bytes, Any]] = []
    append = out.append
    other: list[bytes] = []  # lines for the decoder, in order, until the next typed record
    decode, errors, step, phase, short = _DECODE, _ERRORS, _STEP, _PHASE, _SHORT
    ledger = decoder.ledger
    admit_step, admit_phase = ledger.step, ledger.phase
    max_steps, max_tokens, max_events, slack = (
        MAX_STEPS_PER_S, MAX_TOKENS_PER_S, MAX_EVENTS_PER_S, BUDGET_SLACK_S
    )
    low, high = _window(decoder)
    t_start = decoder.t_start  # moved only by the decoder's lines
    steps_of, phases_of = _counters(ledger, t_start)
    # a line this long may nest deeper than the decoder parses: not sure (raw lines are longer)
    long = max(map(len, raw), default=0) >= _SHORT
    lines = map(bytes.strip, raw)  # (a line is recorded stripped, as `Decoder.many` does)
    taken = 0  # records the decoder took among `out`
    for line in lines:
        if long and len(line) >= short:
            other.append(line)
            continue
        try:
            record = decode(line)
        except errors:
            other.append(line)  # blank, another kind, or not sure: the decoder decides
            continue
        t = record.t
        kind = type(record)
        if not low <= t <= high or (
            kind is step
            and (d := record.d).real_tokens is not None
            and d.tokens is not None
            and d.real_tokens > d.tokens
        ):
            other.append(line)  # not sure: the decoder decides, and names the reason
            continue
        if other:
            got = _others(decoder, other)
            taken += len(got)
            out.extend(got)
            other = []
            low, high = _window(decoder)
            t_start = decoder.t_start
            steps_of, phases_of = _counters(ledger, t_start)
            if decoder.ended:  # a run.end among them: the rest is the decoder's
                other.append(line)
                other.extend(lines)
                break
            if not low <= t <= high:  # a run.start among them
                other.append(line)
                continue
        if kind is step:  # the typed kinds the `Ledger` counts (`_LEDGERED`)
            totals = steps_of(((rank := record.rank) or 0, pid := record.pid))
            if totals is not None:  # `Ledger.step` on a process it has counted
                elapsed = (t - t_start if t > t_start else 0.0) + slack
                k, tokens = d.k, d.tokens
                steps = totals[0] + k if k is not None else totals[0]
                seen = totals[1] + tokens if tokens is not None else totals[1]
                if steps <= max_steps * elapsed and seen <= max_tokens * elapsed:
                    totals[0], totals[1] = steps, seen
                    append((line, record))
                    continue
            if not _admitted(decoder, admit_step, rank, pid, t, d.k, d.tokens, t_start):
                continue
        elif kind is phase:
            d = record.d
            seen = phases_of(((rank := record.rank) or 0, pid := record.pid, name := d.name))
            if seen is not None:  # `Ledger.phase` on a phase of a process it has counted
                elapsed = (t - t_start if t > t_start else 0.0) + slack
                s, n = d.s, d.n
                s = seen[0] + (s if s is not None else 0.0)
                n = seen[1] + (n if n is not None else 0.0)
                if s <= elapsed and n <= max_events * elapsed:
                    seen[0], seen[1] = s, n
                    append((line, record))
                    continue
            if not _admitted(decoder, admit_phase, rank, pid, t, name, d.s, d.n, t_start):
                continue
        append((line, record))
    good = len(out) - taken  # the typed records
    decoder.lines += good
    decoder.good += good
    if other:
        out.extend(_others(decoder, other))
    return out


def _counters(ledger: Ledger, t_start: float | None) -> tuple[Any, Any]:
    """`get` of the `Ledger`'s counters by process (`steps`) and by process and phase
    (`phases`): none before `run.start` (the `Ledger` then measures from the first record)."""
    if t_start is None:
        return _NONE, _NONE
    return ledger.steps.get, ledger.phases.get


_NONE = {}.get  # a lookup that finds nothing


def _admitted(decoder: Decoder, admit: Any, *fields: Any) -> bool:
    """The `Ledger`'s word on a typed step or phase (`admit`: its `step` or `phase`, given the
    record's fields by name); a refusal is counted in the decoder, with its reason."""
    try:
        admit(*fields)
    except Implausible as exc:
        decoder.lines += 1
        decoder.skip(reason_of(exc))
        return False
    return True


#: Lines `typed_many` has handed to the decoder in this process (orjson's `_fast` is per process
#: too).
_handed = 0


def _others(decoder: Decoder, lines: list[bytes]) -> list[tuple[bytes, Any]]:
    """`decoder.many(lines)` for the lines not read typed, which come a few at a time: orjson
    is loaded for them once `FAST_FROM` have come (a log of many `comm` or `memory` records),
    not before. Both parsers give the same records (`decode.py`), and orjson's import costs ~8 ms
    (it pulls in `dataclasses` and `inspect`) that a log whose only other lines are its start,
    hello, facts and end then never pays."""
    global _handed
    _handed += len(lines)
    if _handed >= FAST_FROM:
        _fast_parser()
    return decoder.many(lines)


def _window(decoder: Decoder) -> tuple[float, float]:
    """The times a record of the run can carry (`plausible.in_run`, as `Decoder` applies it)."""
    if decoder.t_start is None:
        return -_INF, _INF
    return decoder.t_start - BEFORE_START_S, decoder.t_start + MAX_RUN_S


__all__ = ["ENVELOPED", "TYPED", "typed_many"]
