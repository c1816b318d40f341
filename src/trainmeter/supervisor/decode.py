"""Lines to records: the one decoder that both the live socket and a replay of the log use.

A line from the socket and the same line read back from `events.jsonl` must be treated the same
way, or a replay would not give the live run's numbers. So `Decoder.lines()` is the only place
where `tm` turns bytes into records: it parses each line with `records.decode` (the wire
schema), then asks `plausible.check` whether the record can be true, and yields the good ones
with their exact bytes. Whatever a line holds (not JSON, nested 5000 deep, a forged step of
10^30, a second `run.end`), it is skipped and counted by its reason; nothing a line holds can
raise out of this loop, so no input can stop the ingest thread or `tm summary`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from .. import records
from .plausible import Implausible, check

#: Kinds only `tm` itself writes: from the socket they are forged, or a bug.
TM_ONLY = frozenset({"run.start", "run.end"})


def reason_of(exc: BaseException) -> str:
    """The reason a line was skipped: the error message's first part ("not JSON", ...)."""
    if isinstance(exc, RecursionError):
        return "nested too deep"
    if isinstance(exc, (records.RecordError, Implausible)):
        return str(exc).split(":", 1)[0]
    return f"undecodable ({type(exc).__name__})"


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

    def skip(self, reason: str, n: int = 1) -> None:
        """Count `n` lines skipped for `reason` (also used for lines lost before decoding)."""
        self.skipped += n
        self.reasons[reason] = self.reasons.get(reason, 0) + n

    def one(self, line: bytes) -> dict[str, Any] | None:
        """The record on one stripped, non-blank line, or None (counted). Never raises."""
        self.lines += 1
        try:
            record = records.decode(line)
            kind = record["kind"]
            if self.ended:
                raise Implausible(f"after run.end: a {kind} record")
            if self.from_socket and kind in TM_ONLY:
                raise Implausible(f"forged {kind}: only tm writes it")
            check(record)
        except Exception as exc:  # noqa: BLE001 - any input at all is counted, never raised
            self.skip(reason_of(exc))
            return None
        if kind == "run.end":
            self.ended = True
        self.good += 1
        return record

    def lines_of(self, chunks: Iterable[bytes]) -> Iterator[tuple[bytes, dict[str, Any]]]:
        """(exact line, record) for each good line of `chunks` (lines, or a datagram's split)."""
        one = self.one
        for raw in chunks:
            line = raw.strip()
            if not line:
                continue
            record = one(line)
            if record is not None:
                yield line, record

    def datagram(self, data: bytes) -> Iterator[tuple[bytes, dict[str, Any]]]:
        """The records in one datagram: several lines joined by newlines."""
        return self.lines_of(data.split(b"\n"))



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
