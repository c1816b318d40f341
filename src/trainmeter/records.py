"""The wire schema: one JSON object a line, in datagrams and in `events.jsonl`.

The run log is a public contract: other tools parse it and a log written by one version must
replay in the next. So this module is small, standard library only (the agent imports it inside
the training process), and strict on the way in: a reader gets either a well-formed record or a
`RecordError` with a reason it can count, never a half-trusted dict.

A record is ``{"v": 1, "t": <monotonic s>, "src": str, "rank": int|None, "pid": int|None,
"kind": str, "d": {...}}``, and, on a value `emit` or a tap accepted, ``"q": int``: its number
in its process (from 1, in order), by which `tm` tells the values the socket delivered from
those it reads from the process's ring after the process ended (`agent/ring.py`).

Each kind's `d` is in `payloads.py`, the one table of kinds. A named value (`emit`, a tap) becomes its record in
one place, `value_record`, for the agent that sends it and for `tm` reading it from a ring.
"""

from __future__ import annotations

import math

from . import payloads

TYPE_CHECKING = False  # typing costs ~9 ms at start-up in every Python the run starts
if TYPE_CHECKING:
    from typing import Any

VERSION = 1

# The environment between `tm` and the processes it starts: the other half of the contract.
#: Path of the ingest datagram socket; set only inside a `tm` run ("already inside tm").
ENV_SOCKET = "TRAINMETER_SOCKET"
#: "1": the agent installs no taps (`tm --no-tap`).
ENV_NO_TAP = "TRAINMETER_NO_TAP"
#: "1", set by a user: the agent does nothing in that process.
ENV_DISABLE = "TRAINMETER_DISABLE"
#: A fixture or `tm hardware --dump` file the GPU sampler replays in place of the driver.
ENV_FAKE_NVML = "TRAINMETER_FAKE_NVML"
#: A JSON list of recorded `torch.cuda.memory_stats()` answers the memory probe replays.
ENV_FAKE_CUDA_MEMORY = "TRAINMETER_FAKE_CUDA_MEMORY"
#: Where measured peak files live.
ENV_PEAKS_DIR = "TRAINMETER_PEAKS_DIR"

#: The kinds this version reads: `payloads.KINDS`, the one table of kinds.
KINDS = frozenset(payloads.KINDS)

#: Keys that `emit()` takes as facts about the run rather than as series (`payloads`).
FACT_KEYS = payloads.EMITTED_FACT_KEYS

#: The largest datagram the agent sends; several records are joined by newlines inside it.
MAX_DATAGRAM = 60_000


class RecordError(ValueError):
    """A line that is not a record this version can read. The message is the reason."""


def make(
    kind: str,
    d: dict[str, Any],
    *,
    t: float,
    src: str,
    rank: int | None = None,
    pid: int | None = None,
) -> dict[str, Any]:
    """A record dict in the canonical field order."""
    return {"v": VERSION, "t": t, "src": src, "rank": rank, "pid": pid, "kind": kind, "d": d}


def value_record(
    key: str,
    value: Any,
    via: str,
    step: int | None = None,
    *,
    t: Any,
    rank: int | None = None,
    pid: int | None = None,
    q: Any = None,
    recovered: bool = False,
) -> dict[str, Any]:
    """A named value given through `via` (`emit` or a tap's name) as its record.

    `emit` of a key in `FACT_KEYS` is a fact about the run (`source: emitted`, no step); any other
    value is a `metric` (`via`, and `step` when known): `payloads.value_is_fact`, the one rule. `src` is `emit` for `emit`, `agent` for a
    tap. `q` is the value's number in its process; `recovered` marks a value read from a ring
    after its process ended (`supervisor/ring.py`).
    """
    recovered_ = True if recovered else None
    if payloads.value_is_fact(via, key):
        kind = payloads.FACT
        d = kind.build(key=key, value=value, source="emitted", recovered=recovered_)
    else:
        kind = payloads.METRIC
        d = kind.build(key=key, value=value, via=via, step=step, recovered=recovered_)
    src = "emit" if via == "emit" else "agent"
    record = make(kind.name, d, t=t, src=src, rank=rank, pid=pid)
    if q is not None:
        record["q"] = q
    return record


def _not_serializable(o: Any) -> Any:
    raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")


try:  # the json package's own C encoder, without importing the package: every Python `tm`
    # starts imports this module at its start, and `json` brings `re` (a third of the agent's
    # start-up). What `json.dumps(record, allow_nan=False, separators=(",", ":"))` does, less
    # the encoder object it builds per call
    from _json import encode_basestring_ascii as _escape
    from _json import make_encoder as _make_encoder
except ImportError:  # a Python without the C accelerator: the package, imported then
    _make_encoder = None


def encode(record: dict[str, Any]) -> str:
    """One line of JSON, without the newline. NaN and infinity are refused, not written."""
    try:
        if _make_encoder is not None:
            encoder = _make_encoder(
                {}, _not_serializable, _escape, None, ":", ",", False, False, False
            )
            return "".join(encoder(record, 0))
        import json

        return json.dumps(record, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise RecordError(f"cannot encode: {exc}") from None


def _reject_constant(name: str) -> Any:
    raise RecordError(f"{name} is not a number a record may hold")


#: One decoder for every line, made at the first (`tm` reads; the agent never does):
#: `json.loads(..., parse_constant=...)` builds a new decoder per call, a third of the cost of
#: reading a line (ingest and replay read millions).
_DECODER: Any = None


def _decoder() -> Any:
    global _DECODER
    import json

    _DECODER = json.JSONDecoder(parse_constant=_reject_constant)
    return _DECODER


def decode(line: str | bytes) -> dict[str, Any]:
    """Parse and check one line; raise `RecordError` with the reason when it is not a record."""
    if isinstance(line, bytes):
        try:
            line = line.decode("utf-8")
        except UnicodeDecodeError:
            raise RecordError("not UTF-8") from None
    line = line.strip()
    if not line:
        raise RecordError("empty line")
    try:
        record = (_DECODER or _decoder()).decode(line)
    except RecordError:
        raise
    except ValueError as exc:
        raise RecordError(f"not JSON: {exc.msg if hasattr(exc, 'msg') else exc}") from None
    return validate(record)


def validate(record: Any) -> dict[str, Any]:
    """Check the envelope of an already parsed record; return it, or raise `RecordError`."""
    if not isinstance(record, dict):
        raise RecordError("not a JSON object")
    version = record.get("v")
    if version != VERSION:
        raise RecordError(f"schema version {version!r} is not {VERSION}")
    kind = record.get("kind")
    if kind not in KINDS:
        raise RecordError(f"unknown kind {kind!r}")
    t = record.get("t")
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t):
        raise RecordError("t is not a finite number")
    if not isinstance(record.get("d"), dict):
        raise RecordError("d is not an object")
    rank = record.get("rank")
    if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int)):
        raise RecordError("rank is not an integer")
    return record


def redact_argv(argv: list[str]) -> list[str]:
    """The command line with secret-looking values replaced (see `trainmeter.redact`)."""
    from .redact import redact_argv as redact

    return redact(argv)
