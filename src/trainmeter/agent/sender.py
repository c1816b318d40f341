"""One-way, never-blocking delivery of records from a training process to `tm`.

Why it looks like this:

- The hot path is the user's. `send()` appends a small dict to a deque (thread-safe, no lock,
  no JSON); aggregators (steps, emitted values) register a *drain* callback instead of sending
  per event. A daemon thread wakes every `interval` seconds, drains, encodes and sends, so at
  most ~20 step records a second leave a rank. What it has not shipped yet is in the ring
  (values, step totals, rare records) when the process is killed.
- An idle thread backs off. Each wake costs the process ~100 µs of CPU here (the wake-up and
  a cold flush; a warm one that finds nothing is ~4 µs), twenty times a second, whether or not
  the loop gives it anything. After `IDLE_TICKS` ticks in a row that shipped nothing it waits
  `IDLE_CAP_S` between ticks, and whatever brings work brings the tick back at once
  (`wake`, which rings the bell): a record (`send`), a value (`emit`'s steady call stops while
  the thread is backed off, `hot` cleared, so the next value takes the outbox's checked path,
  which wakes it), a step (a step listener armed only while backed off: `idle_listeners`).
  None of these adds a call to the steady `emit` or the steady step. What can still wait up to
  `IDLE_CAP_S` (0.5 s) is what tells nobody: a phase's time moved with no step, value or record
  around it, a memory reading (on this clock anyway), and a value whose `emit` read `hot` just
  before it was cleared. A thread with a datagram waiting (receiver behind, socket path gone)
  never backs off: the retry and the give-up timer keep their tick.
- Datagrams over a Unix socket: no connection to keep, no ordering to wait for. Several records
  go in one datagram, newline separated, up to `records.MAX_DATAGRAM` bytes.
- A full socket buffer keeps the datagram for the next tick (bounded), then drops it. What a
  dropped datagram held is counted only when it is lost: a rare record the ring keeps (or that
  `tm` counts by its number) and a step record whose totals the ring's header holds reach the
  log anyway (`tm` reads them from the ring), so only the rest is counted, as the fact
  `agent_dropped_records`.
- A supervisor that is gone (the socket path refuses) makes the sender go quiet for good.
- After `fork()` the child gets a fresh socket and a fresh thread (DataLoader workers fork).
"""

from __future__ import annotations

# _thread and _collections, not threading and collections: ~3 ms in every Python the run
# starts (threading imports collections and functools), for a thread and a deque
import _thread
import atexit
import os
import time
from _collections import deque

# The C module under `socket`: socket.py pulls in enum and selectors, ~4 ms in every Python
# the run starts (a script that never imports them pays them for us)
from _socket import AF_UNIX, SO_SNDBUF, SOCK_DGRAM, SOL_SOCKET
from _socket import socket as Socket

from .. import records
from ..payloads import FACT
from ..records import ENV_SOCKET

TYPE_CHECKING = False  # typing costs ~9 ms at start-up in every Python the run starts
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

SOCKET_ENV = ENV_SOCKET
INTERVAL_S = 0.05
_MAX_BACKLOG = 256  # datagrams kept while the receiver is full, then dropped and counted
_RING_BATCH = 2048  # values taken from the ring per datagram batch
#: Ticks in a row that ship nothing before the thread backs off (0.1 s: a loop that steps or
#: logs more than seven times a second never sees it; a slower one pays a step listener's
#: call, under 1 µs, on the step after each pause, and a value its checked path)
IDLE_TICKS = 2
#: The wait of a backed-off thread: the worst delay of a record that wakes nobody (a phase's
#: time with no step, value or record after it), half of the live view's refresh (1 s); and the
#: memory probe's reading without steps stays about once a second (`probes/memory.py`)
IDLE_CAP_S = 0.5
#: The socket path gone this long (not bound again by `tm`): the supervisor is gone too.
MISSING_GIVE_UP_S = 30.0
#: Kinds the ring keeps its own way (step totals, value slots); every other kind is "rare".
_NOT_RARE = frozenset({"step", "metric"})
#: Set by `agent.ring` when imported: (sender, record) -> None, numbers the record (`r`) and
#: keeps its line in the process's ring, so a process killed before the next tick loses none.
rare_keeper: Callable[[Sender, dict[str, Any]], None] | None = None
#: Called with the rank when a process learns it after it started (`Sender.learn_rank`): the
#: ring writes it in its header, the outbox drops line templates made without it.
rank_listeners: list[Callable[[int], None]] = []
#: Called with the sender on its thread when it backs off (`Sender._back_off`): each arms what
#: brings it back for work that does not come through `send` or `emit` (the step probe: a step
#: listener that calls `Sender.wake` at the next step, and removes itself).
idle_listeners: list[Callable[[Sender], None]] = []


def _rank_from_env() -> int | None:
    for name in ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        try:
            return int(os.environ[name])
        except (KeyError, ValueError):  # unset, or not a number ("--1", "²"): look further
            continue
    return None


class Sender:
    """Queues records and ships them from a background thread. Never raises to its caller."""

    def __init__(self, path: str, interval: float = INTERVAL_S) -> None:
        self.path = path
        self.interval = interval
        self.rank = _rank_from_env()
        self.pid = os.getpid()
        self.quiet = False
        self.dropped = 0
        self.drop_reasons: dict[str, int] = {}  # why each of `dropped` was lost, where it was
        self._reported_dropped = 0
        #: records, and lines encoded already with whether the ring holds what they say
        self._queue: deque[dict[str, Any] | tuple[bytes, bool]] = deque()
        self._drains: list[Callable[[], None]] = []
        self._backlog: deque[tuple[bytes, int, int]] = deque()
        #: Set by the outbox: take up to n values from the ring as (lines, the last number);
        #: called after a datagram holding numbers up to q was sent; how many wait.
        self.ring_source: Callable[[int], tuple[list[bytes], int]] | None = None
        #: Set by the outbox: the same values as one binary datagram (tm formats them), how
        #: many records it stands for, and the last number; preferred over `ring_source`
        self.ring_values: Callable[[int], tuple[bytes, int, int]] | None = None
        self.on_shipped: Callable[[int], None] | None = None
        self.ring_pending: Callable[[], int] | None = None
        self.pending_count: Callable[[], int] | None = None
        #: Set by the outbox: store this sender's drop count in the ring, return the ring's own
        self.ring_dropped: Callable[[int], int] | None = None
        #: Set by the outbox: why values were dropped, in words, for the count's fact
        self.drop_note: Callable[[int], str] | None = None
        #: Set by the ring: every rare record numbered up to r was shipped (its copy may go)
        self.rare_shipped: Callable[[int], None] | None = None
        self.at_exit_left = 0
        #: Set by the ring: this process has one. Its step totals are in the ring's header, and
        #: so is the count of values that found no room in it (sent by the socket alone), so
        #: neither a step record nor such a value is lost when undelivered: `tm` takes the
        #: steps from the totals and counts the values from the header
        self.has_ring = False
        self._hot: Any = None  # `hot`
        #: The thread is backed off (waits up to `IDLE_CAP_S`): `wake` brings its tick back
        self.idle = False
        self._found = 0  # datagrams queued for shipping, ever: a tick that queues none is idle
        self._ring_closed = False  # set when giving up at exit: the rest is left to the ring
        self._missing_since: float | None = None  # when the socket path was first found gone
        self._delivered_once = False  # a path gone after a delivery was removed, not never there
        self._sock: Socket | None = None
        self._thread: int | None = None  # the thread's ident once started
        self._bell = _held_lock()  # released to wake the thread before its interval is up
        self._lock = _thread.allocate_lock()  # one flusher at a time (thread, atexit, flush())
        self._start_lock = _thread.allocate_lock()  # apart: a drain may send, and sending may start

    # ---- the cheap side, called from the training loop ----------------------------------

    def send(
        self, kind: str, d: dict[str, Any], src: str = "agent", t: float | None = None
    ) -> None:
        """Queue one record. Costs a dict and a deque append."""
        if self.quiet:
            return
        record = {
            "v": records.VERSION,
            "t": time.monotonic() if t is None else t,
            "src": src,
            "rank": self.rank,
            "pid": self.pid,
            "kind": kind,
            "d": d,
        }
        if kind not in _NOT_RARE and rare_keeper is not None:
            try:
                rare_keeper(self, record)
            except Exception:  # noqa: BLE001 - promise 1: the socket still carries it
                pass
        self._queue.append(record)
        if self.idle:
            self.wake()
        if self._thread is None:
            self._start()

    def learn_rank(self, rank: int) -> bool:
        """The rank became known after this process started: a launcher that sets `RANK` only
        in the processes it starts (Lightning's own process, its first rank, has none) leaves
        it to `torch.distributed`. Records from now on carry it; True when it was unknown."""
        if self.rank is not None or type(rank) is not int or rank < 0:
            return False
        self.rank = rank
        for listener in tuple(rank_listeners):
            try:
                listener(rank)
            except Exception:  # noqa: BLE001 - promise 1: the records still carry it
                pass
        return True

    def send_line(self, line: bytes, kept: bool) -> None:
        """Queue one record already encoded (a drain's, on the sender thread: the step totals'
        line is a filled template). `kept`: what it says is also in the ring."""
        if not self.quiet:
            self._queue.append((line, kept))

    def add_drain(self, drain: Callable[[], None]) -> None:
        """Register a callback the flusher calls before each send, to turn state into records."""
        self._drains.append(drain)
        if self._thread is None:
            self._start()

    # ---- the background side -------------------------------------------------------------

    def _start(self) -> None:
        with self._start_lock:
            if self._thread is not None or self.quiet:
                return
            # a daemon thread (nothing joins it at exit: the atexit flush is the last word),
            # started without threading's import nor its wait for the thread to run
            self._thread = _thread.start_new_thread(self._run, ())

    def _run(self) -> None:
        # one C call a tick: a held lock waited on with a timeout (an Event's wait and clear
        # are a score of Python calls, and this runs twenty times a second)
        wait = self._bell.acquire
        empty = 0  # ticks in a row that shipped nothing
        while not self.quiet:
            rung = wait(timeout=self.idle_wait(empty))
            was_idle = self.idle
            if not rung and empty >= IDLE_TICKS and not was_idle:
                # before this tick's flush: what came before the flags is shipped by it, what
                # comes after them wakes the thread
                self._back_off()
            found = self._found
            self.flush()
            if rung or self._found != found or self._backlog:
                empty = 0
                if was_idle or self.idle:
                    self.idle = False  # found work nobody rang for (a phase, a late value)
                    self._bell.acquire(False)  # a ring this flush answered already
            else:
                empty += 1

    def idle_wait(self, empty: int) -> float:
        """How long the thread waits after `empty` ticks in a row that shipped nothing: its
        interval, then (backed off: the tick after `IDLE_TICKS` empty ones, which set the flags,
        shipped nothing either) `IDLE_CAP_S`."""
        return self.interval if empty <= IDLE_TICKS else max(self.interval, IDLE_CAP_S)

    @property
    def hot(self) -> Any:
        """The ring `emit` may write into without checking anything else (this sender live, its
        thread started, the outbox hooked in, the ring this process's and this sender's), or
        None. Set by the outbox; whatever ends one of those clears it (going quiet, backing
        off, a fork, a new ring), and `emit` takes its checked path until the outbox sets it
        again. `emit` reads it as the module's `emit_hot`, kept here: one global read, with
        no sender to look up and test first."""
        return self._hot

    @hot.setter
    def hot(self, ring: Any) -> None:
        global emit_hot
        self._hot = ring
        if ring is not None and self is _sender:
            emit_hot = ring.emit_path
        elif emit_hot is not None and emit_hot[-1].owner is self:
            emit_hot = None

    def _back_off(self) -> None:
        """Nothing came for `IDLE_TICKS` ticks: from now on whatever brings work wakes the thread.
        `emit` writes no value unchecked (its checked path wakes it), and the step probe arms a
        listener for the next step."""
        self.idle = True
        self.hot = None
        for arm in tuple(idle_listeners):
            try:
                arm(self)
            except Exception:  # noqa: BLE001 - promise 1: that work waits for the next tick
                pass

    def wake(self) -> None:
        """Work came while the thread is backed off: its tick comes back now (any thread). A
        no-op while it is not."""
        if self.idle:
            self.idle = False
            self._ring_bell()

    def _ring_bell(self) -> None:
        """Wake the thread now (it takes the lock back, held, when it wakes)."""
        try:
            self._bell.release()
        except RuntimeError:  # rung already, not yet heard
            pass

    def flush(self) -> None:
        """Drain aggregators, encode the queue and send it. Safe from any thread."""
        try:
            with self._lock:
                self._flush_locked()
        except Exception:  # noqa: BLE001 - promise 1: delivery problems never reach the loop
            pass

    def _flush_locked(self) -> None:
        if self.quiet:
            return
        for drain in list(self._drains):
            try:
                drain()
            except Exception:  # noqa: BLE001 - a broken aggregator is dropped, the rest go on
                self._drains.remove(drain)
        total = self.dropped_total()
        if total != self._reported_dropped:
            self._reported_dropped = total
            d = FACT.build(key="agent_dropped_records", value=total, source="detected")
            if total > self.dropped:
                self.drop_reasons["refused by the ring (full, or its key table full)"] = (
                    total - self.dropped
                )
            parts = [f"{n} {why}" for why, n in sorted(self.drop_reasons.items()) if n]
            try:  # the ring's refusals in words (which table was full), from the outbox
                words = self.drop_note(0) if total > self.dropped and self.drop_note else ""
            except Exception:  # noqa: BLE001 - promise 1: the count goes without those words
                words = ""
            d["note"] = "; ".join(parts + ([f"the ring's refusals: {words}"] if words else []))
            self._queue.append(
                records.make(
                    FACT.name,
                    d,
                    t=time.monotonic(),
                    src="agent",
                    rank=self.rank,
                    pid=self.pid,
                )
            )
        lines: list[bytes] = []
        lost: list[bool] = []  # per line: whether dropping it loses it (see `_lost_if_dropped`)
        rare = 0  # the highest rare number among them
        while self._queue:
            record = self._queue.popleft()
            if type(record) is tuple:  # a line encoded already (`send_line`)
                line, kept = record
                lines.append(line)
                lost.append(not (kept and self.has_ring))
                continue
            try:
                line = records.encode(record).encode("utf-8")
            except records.RecordError:
                self.drop(1, "not encodable as JSON")
                continue
            if len(line) > records.MAX_DATAGRAM:
                self.drop(1, "too large for a datagram")
                continue
            lines.append(line)
            lost.append(self._lost_if_dropped(record))
            r = record.get("r")
            if r is not None and r > rare:
                rare = r
        self._pack(lines, 0, rare, lost)
        self._ship()
        source = self.ring_source
        # values from the ring while the receiver keeps up: what it cannot take yet stays in
        # the ring (shared memory), not in this process, so nothing waits here to be lost
        values = self.ring_values
        while source is not None and not self._backlog and not self.quiet and not self._ring_closed:
            if values is not None:
                datagram, count, last = values(_RING_BATCH)
                if not last:
                    break
                self._backlog.append((datagram, last, count, 0))
                self._found += 1
            else:
                ring_lines, last = source(_RING_BATCH)
                if not last:
                    break
                self._pack(ring_lines, last)
            self._ship()

    def _lost_if_dropped(self, record: dict[str, Any]) -> bool:
        """Whether a record that is never delivered is lost. Not a rare record: numbered, it is
        in the ring (`tm` logs it after the process ends) or, when the ring could not keep it,
        `tm` counts it by its number; not a step record whose totals the ring holds (`tm` logs
        the steps delivered records do not account for); not the drop count itself (the ring's
        header carries it); not a value the ring had no room for (its header counts those, and
        `tm` counts what of them never arrived). Anything else is only here."""
        if type(record) is tuple:  # a line encoded already: (line, whether the ring has it)
            return not (record[1] and self.has_ring)
        if "r" in record:
            return False
        kind = record.get("kind")
        if kind == "step" or kind == "metric":  # a metric here is a value the ring had no room for
            return not self.has_ring
        if kind == "fact":
            d = record["d"]
            if d.get("source") == "emitted":  # an emitted fact the ring had no room for
                return not self.has_ring
            return d.get("key") != "agent_dropped_records"
        return True

    def _pack(
        self, lines: list[bytes], last_q: int, rare: int = 0, lost: list[bool] | None = None
    ) -> None:
        """Join lines into datagrams of at most MAX_DATAGRAM bytes. With lines from the ring
        (`last_q` > 0) every datagram is marked -1 ("the ring's") and the last one carries
        `last_q`, the highest number among them, to release when shipped; 0: not the ring's.
        The last datagram also carries `rare`, the highest rare record number among the lines:
        once it is shipped, the ring's copies up to it may go. Each datagram's count is of the
        records lost if it is dropped (`lost[i]` per line; every line when not given)."""
        batch: list[bytes] = []
        size = at_risk = 0
        for i, line in enumerate(lines):
            risk = lost is None or lost[i]
            if len(line) > records.MAX_DATAGRAM:
                if risk:
                    self.drop(1, "too large for a datagram")  # a key of tens of kilobytes
                continue
            if size + len(line) + 1 > records.MAX_DATAGRAM and batch:
                self._backlog.append((b"\n".join(batch), -1 if last_q else 0, at_risk, 0))
                batch, size, at_risk = [], 0, 0
            batch.append(line)
            size += len(line) + 1
            at_risk += risk
        if batch or last_q:
            self._backlog.append((b"\n".join(batch), last_q, at_risk, rare))
            self._found += 1

    def flush_at_exit(self, timeout: float = 2.0) -> None:
        """The last flush: wait (briefly) for a busy receiver instead of dropping the tail.

        What the ring holds needs no wait: `tm` reads it after the process ends. What is held
        only here (no ring, or records the ring does not keep) and cannot be sent in time is
        counted, and the count goes out in one last small datagram."""
        deadline = time.monotonic() + timeout
        self.flush()
        while (self._backlog or self.pending_values()) and not self.quiet:
            if time.monotonic() >= deadline:
                break
            time.sleep(0.005)
            self.flush()
        if self.quiet:
            return
        left = sum(n for _, q, n, _ in self._backlog if not q)
        left += sum(map(self._lost_if_dropped, self._queue))
        if not self.has_ring:  # else the ring's header counts them (values it had no room for)
            left += self.pending_values(ring=False)
        if left or self._backlog:
            # Giving up. Values the ring holds stay there for tm, which takes every number
            # above the last it received: so no later value may be shipped past them now
            self._ring_closed = True
            self.drop(left, "receiver full at exit")
            self.dropped_total()  # into the ring's header first: tm reads it whatever happens
            self._backlog.clear()
            self._queue.clear()
            if left:
                self.flush()  # only the count now: one short datagram
        self.at_exit_left = left

    def before_exec(self, timeout: float) -> int | None:
        """The process is about to become another program (`agent/lifecycle.py`): send what
        waits (at most `timeout` s for a busy receiver), count in the ring's header what cannot
        go and the ring does not hold, and keep the flush lock so this sender's thread cannot
        be cut off half way through a flush. Returns what `exec_failed` needs to undo it (None:
        the lock could not be taken, nothing to undo)."""
        deadline = time.monotonic() + timeout
        self.flush()
        while (self._backlog or self.pending_values()) and not self.quiet:
            if time.monotonic() >= deadline:
                break
            time.sleep(0.005)
            self.flush()
        if not self._lock.acquire(timeout=max(deadline - time.monotonic(), 0.05)):
            return None
        try:
            left = sum(n for _, q, n, _ in self._backlog if not q)
            left += sum(map(self._lost_if_dropped, self._queue))
            if not self.has_ring:
                left += self.pending_values(ring=False)
            if left and self.ring_dropped is not None:  # the new program's tm reads it there
                self.ring_dropped(self.dropped + left)
        except Exception:  # noqa: BLE001 - promise 1: the exec goes ahead regardless
            left = 0
        return left

    def exec_failed(self, left: int) -> None:
        """The exec failed and this program goes on: the count and the lock as they were."""
        try:
            if left and self.ring_dropped is not None:
                self.ring_dropped(self.dropped)
        finally:
            self._lock.release()

    def drop(self, n: int, why: str) -> None:
        """Count `n` records lost here, with the reason (the fact's note says each)."""
        self.dropped += n
        self.drop_reasons[why] = self.drop_reasons.get(why, 0) + n

    def dropped_total(self) -> int:
        """Records this process dropped (here) or refused (its ring full), kept in the ring's
        header too, so `tm` learns the count even when the last datagram cannot go."""
        refused = 0
        try:
            if self.ring_dropped is not None:
                refused = self.ring_dropped(self.dropped)
        except Exception:  # noqa: BLE001 - promise 1: counting drops never raises into the loop
            pass
        return self.dropped + refused

    def pending_values(self, ring: bool = True) -> int:
        """Values accepted and not yet shipped (with `ring`, counting those the ring holds)."""
        try:
            count = self.pending_count() if self.pending_count is not None else 0
            if ring and self.ring_pending is not None:
                count += self.ring_pending()
            return count
        except Exception:  # noqa: BLE001 - promise 1: counting drops never raises into the loop
            return 0

    def _ship(self) -> None:
        sock = self._socket()
        while self._backlog and not self.quiet:
            datagram, last_q, count, rare = self._backlog[0]
            if datagram:
                try:
                    sock.sendto(datagram, self.path)
                except BlockingIOError:
                    break  # the receiver is behind: keep it for the next tick
                except (FileNotFoundError, NotADirectoryError):
                    # the path is gone (a /tmp cleaner), not `tm`: it binds it again. Keep what
                    # waits (the ring holds the values) and try again next tick; give up only
                    # when it stays gone
                    if not self._delivered_once:  # never there: no supervisor to wait for
                        self.go_quiet()
                        return
                    now = time.monotonic()
                    if self._missing_since is None:
                        self._missing_since = now
                    if now - self._missing_since > MISSING_GIVE_UP_S:
                        self.go_quiet()
                        return
                    break
                except ConnectionRefusedError:  # the socket is there and nobody reads: tm died
                    self.go_quiet()
                    return
                except OSError:
                    if last_q:
                        break  # the ring's: never skip past it (tm would then skip it too)
                    self.drop(count, "send failed")
                    rare = 0  # not shipped: the ring keeps its copies
                else:
                    self._delivered_once = True
            self._missing_since = None
            self._backlog.popleft()
            if last_q > 0 and self.on_shipped is not None:
                self.on_shipped(last_q)
            if rare and self.rare_shipped is not None:
                self.rare_shipped(rare)
        while len(self._backlog) > _MAX_BACKLOG:
            datagram, last_q, count, rare = self._backlog.popleft()
            if last_q:  # the ring still holds these: leave them to it rather than drop them
                self._backlog.appendleft((datagram, last_q, count, rare))
                break
            self.drop(count, "receiver behind (backlog full)")

    def _socket(self) -> Socket:
        if self._sock is None:
            sock = Socket(AF_UNIX, SOCK_DGRAM)
            sock.setblocking(False)
            try:  # room for a few full datagrams in flight (capped by net.core.wmem_max)
                sock.setsockopt(SOL_SOCKET, SO_SNDBUF, 1 << 20)
            except OSError:
                pass
            self._sock = sock
        return self._sock

    def go_quiet(self) -> None:
        """The supervisor is gone: stop sending and forget what was queued, for good."""
        self.quiet = True
        self.hot = None
        self._queue.clear()
        self._backlog.clear()
        self._ring_bell()

    def after_fork(self) -> None:
        """In a forked child: own socket, own thread (started by the first value or record),
        own pid; nothing of the parent's queue, whose records are the parent's to send."""
        self.pid = os.getpid()
        self.hot = None  # the parent's ring: the child writes its own
        self.idle = False  # the child's thread starts at its tick
        self.dropped = self._reported_dropped = 0
        self.drop_reasons = {}
        self._ring_closed = False
        if self._sock is not None:
            try:
                self._sock.close()  # the child's copy of the parent's socket
            except OSError:
                pass
        self._sock = None
        self.rare_shipped = None  # the parent's ring's: the child's ring sets its own
        self.has_ring = False  # until the child's own ring holds its totals
        self._thread = None
        self._lock = _thread.allocate_lock()
        self._start_lock = _thread.allocate_lock()
        self._bell = _held_lock()
        self._queue.clear()
        self._backlog.clear()


def _held_lock() -> _thread.LockType:
    lock = _thread.allocate_lock()
    lock.acquire()
    return lock


_sender: Sender | None = None
_sender_checked = False
#: What `emit`'s steady call reads: the `emit_path` of the live sender's `hot` ring (its key
#: ids, numbers with their time, mapping, the ring itself), or None (`Sender.hot`)
emit_hot: tuple[dict[str, int], Any, Any, Any] | None = None


def get_sender() -> Sender | None:
    """The process's sender, or None outside `tm` or once the supervisor is gone."""
    global _sender, _sender_checked, emit_hot
    if not _sender_checked:
        _sender_checked = True
        path = os.environ.get(SOCKET_ENV)
        if path:
            _sender = Sender(path)
            atexit.register(_sender.flush_at_exit)
            emit_hot = None  # a ring an earlier sender left hot (a test's) is not this one's
    if _sender is not None and _sender.quiet:
        return None
    return _sender


def _after_fork_in_child() -> None:
    if _sender is not None:
        _sender.after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
