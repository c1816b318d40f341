"""The end of a supervised run, after the child exited: the contract is the order.

1. the live loop stops, the held-back descriptors are given back;
2. the socket gets its grace period for the agents' last datagrams, then the rings give what
   the socket never delivered (a process killed before it could send), and faulthandler's
   stacks their place in the run directory;
3. the drop counts, why the run was watched from outside only, `run.end` last; the log sealed;
4. `summary.json` from the engine that was fed exactly the logged records; a long log's
   checkpoint; the live views' end; `meta.json` with how the run ended.
"""

from __future__ import annotations

import os
import time

from ..payloads import CRASH, FACT, RUN_END
from .observe_only import explain_observe_only

TYPE_CHECKING = False  # what only annotations need: imported by type checkers, not by a run
if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime
    from pathlib import Path
    from typing import Any, Protocol

    from ..runlog.observers import ObserverSet
    from ..runlog.recorder import Recorder
    from ..runlog.store import RunStore
    from .descriptors import Reserve
    from .launcher import ChildExit
    from .live import LiveLoop
    from .observe_only import Judged
    from .ring import Delivered

    class Ended(Judged, Protocol):
        """What the end reads of the session (`session.Session`), and the two it sets."""

        store: RunStore | None
        live: LiveLoop | None
        reserve: Reserve
        grace_s: float
        delivered: Delivered | None
        forwarded: list[int]
        oom_before: dict[str, Any] | None
        t0: float
        started_utc: datetime | None
        observers: ObserverSet
        warn: Callable[[str, str], None]
        final: dict[str, Any] | None
        elapsed_s: float | None

        def attach_engine(self) -> None: ...
        def about(self) -> dict[str, Any]: ...

#: A finished run's log shorter than this replays in a blink: `tm` leaves it no checkpoint.
LIVE_CHECKPOINT_FROM = 1 << 20


def agents_alive(recorder: Recorder) -> bool:
    """Whether a process that said hello still runs (and so may still send). A zombie (exited,
    not yet reaped by its parent: a DataLoader worker whose parent is gone) sends nothing more:
    its last datagrams are in the socket's queue already."""
    for pid in recorder.hello_pid_set():
        try:
            os.kill(pid, 0)  # signal 0: a liveness check, nothing is delivered
        except ProcessLookupError:
            continue
        except OSError:
            return True  # exists, not ours to signal
        if not _exited(pid):
            return True
    return False


def checked(ingest: Any, accept: Callable[[bytes, dict[str, Any]], None]) -> Any:
    """`accept` for the records read from the rings, through the socket's decoder: a record a
    ring holds is believed only as one the socket brought would be (counted when it is not)."""

    def take(line: bytes, record: dict[str, Any]) -> None:
        for good_line, good in ingest.decoder.many([line]):
            accept(good_line, good)

    return take


def _exited(pid: int) -> bool:
    """Whether the process has exited and waits to be reaped (Linux; elsewhere: not known)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] in (b"Z", b"X")


def finish(session: Ended, child: ChildExit) -> None:
    """Everything after the child's exit, up to `meta.json` (see the module's order)."""
    from datetime import datetime, timezone

    from ..runlog.decode import log_summary
    from . import death, ring
    from .about import meta
    from .live import LiveLoop

    recorder, ingest, store = session.recorder, session.ingest, session.store
    ended_at = time.monotonic()  # the command's end: the views' last waits count from here
    for view in session.observers.observers:
        if hasattr(view, "ended_at"):  # --notify: holds tm's exit at most its wait after this
            view.ended_at = ended_at
    if session.live is not None:
        session.live.stop(timeout=0.1)
    session.reserve.release()  # what follows must not fail for want of a descriptor
    if ingest is not None:
        ingest.settle(max_s=session.grace_s, agents_alive=lambda: agents_alive(recorder))
        # the last datagram first (a program's new-image notice among them reads its earlier
        # ring), then every ring left, then the directory goes
        ingest.stop(keep_dir=True)
        rings = ingest.ring_maps()
        faults = death.collect_faults(ingest.dir, store.path if store else None)
        ingest.remove_dir()
        # what a death kept back, judged as the socket's records are (and a replay will be)
        ring.recover(rings, session.delivered, checked(ingest, recorder.accept))
        for fault in faults:  # a native crash: where faulthandler's stacks now are
            recorder.write_tm(CRASH, fault)
        if ingest.rings_unread:  # what the socket did not bring from them is lost
            recorder.write_tm(FACT, {
                "key": "agent_rings_unread", "value": ingest.rings_unread,
                "source": "detected",
                "note": "ring files tm could not open at the end (out of descriptors?): "
                "steps and values they held and the socket did not deliver are not counted",
            })
    if session.live is not None:
        session.live.record_dropped()
        session.live.close_samplers()
    elif ingest is not None and ingest.dropped:
        LiveLoop(
            recorder,
            session.warn,
            dropped=lambda: ingest.dropped,
            drop_reasons=lambda: ingest.drop_reasons,
        ).record_dropped()
    explain_observe_only(session)
    elapsed = time.monotonic() - session.t0
    session.elapsed_s = elapsed
    end = {"exit_status": child.status, "signal": child.signal, "elapsed_s": elapsed}
    if child.signal is not None and child.signal in session.forwarded:
        end["signal_from"] = "outside"  # sent to tm (a scheduler, a person) and passed on
    oom = death.oom_delta(session.oom_before, death.oom_kills())
    if oom is not None:
        end["oom_kills"] = oom["kills"]
        end["oom_source"] = oom["source"]
    recorder.write_tm(RUN_END, end)
    recorder.seal()
    recorder.close()
    session.attach_engine()
    session.final = recorder.snapshot(now=None)
    session.final["log"] = log_summary(recorder.written, recorder.written, {})
    store.write_json("summary.json", session.final)
    died = session.final.get("death")
    if isinstance(died, dict) and died.get("text"):
        end["cause"] = died["text"]  # `tm runs` reads it from meta.json
    if store.path is not None and store.broken is None:
        save_checkpoint(store.path / "events.jsonl", recorder)
    session.observers.finish(session.final)
    end_utc = datetime.now(timezone.utc).isoformat(timespec="seconds")
    store.write_json(
        "meta.json", meta(session.about(), session.started_utc, {"end_utc": end_utc, **end}),
        last=True,  # with the disk space held back: a full disk still says how the run ended
    )


def save_checkpoint(events: Path, recorder: Recorder) -> None:
    """A long run's engine, kept beside its log: the next look at the run is at once.
    A short log replays in a blink: no checkpoint, and nothing imported for one."""
    try:
        if os.stat(events).st_size < LIVE_CHECKPOINT_FROM:
            return
    except OSError:
        return
    from ..runlog.replay import save_finished

    save_finished(events, recorder)
