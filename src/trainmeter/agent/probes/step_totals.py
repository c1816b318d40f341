"""The step probe's running totals: counted by the training thread, published in the ring.

Nothing is sent from the hot path: `commit` (one more step) publishes the running totals in one
`struct.pack_into` into the header of the process's ring (`agent.ring`, shared memory that
outlives the process, so the steps a killed process finished are still there for `tm`). One C
call is one assignment as far as other threads can tell: the sender thread reads the totals
whole (`totals()`, a `Totals`) and turns the difference since its last look into one `step`
record per flush (`drain`), with no lock. The step count sits last in memory, so even a reader
of a process killed mid-write never sees a step whose tokens are missing.

The training thread counts in plain ints (`state.n_micro`, `state.n_tokens` ...): each root call
adds its micro-batch and tokens at once, and `commit` only advances `state.n_steps` and
publishes, so what is published is always whole steps. Until there is a ring, the totals go to
a scratch buffer of the same layout. Standard library only.
"""

from __future__ import annotations

import struct
import time
from collections import namedtuple

from ... import records
from ...payloads import STEP
from .. import ring as ring_module
from .. import sender as sender_module
from ..sender import get_sender
from .step_state import call, state, step_listeners

TYPE_CHECKING = False  # typing costs milliseconds in every Python the run starts
if TYPE_CHECKING:
    from typing import Any

#: Running totals of this process, published whole by the step hook: steps, tokens (padding
#: included), real (padding excluded, summed over micro-batches whose padding could be read),
#: real_missing (micro-batches whose padding could not be read), micro, and t (monotonic time
#: of the last step). A `collections.namedtuple`: `typing.NamedTuple` would import `typing`.
Totals = namedtuple("Totals", "steps tokens real real_missing micro t")

_monotonic = time.monotonic  # these three: what `commit` calls (`steps._after_step` too)
_pack_totals = ring_module.TOTALS.pack_into
_pack_step = ring_module.STEP_TOTALS.pack_into  # no tokens seen: micro, t, steps alone
_unpack_totals = ring_module.TOTALS.unpack_from
_TOTALS_AT = ring_module.TOTALS_AT
_STEP_AT = ring_module.STEP_TOTALS_AT

state.sent = Totals(0, 0, 0, 0, 0, 0.0)


def totals() -> Totals:
    """The running totals as the step hook last published them (any thread)."""
    tokens, real, missing, micro, t, steps = _unpack_totals(state.hdr, _TOTALS_AT)
    return Totals(steps, tokens, real, missing, micro, t)


def step_count() -> int:
    """Optimizer steps this process committed (the training thread's own count)."""
    return state.n_steps


def last_step_t() -> float:
    """`time.monotonic()` when this process committed its last step (0.0 before the first)."""
    return state.t


def mine() -> Totals:
    """The training thread's own counters (private memory, safe after fork), the micro-batches
    of the step in progress included."""
    s = state
    return Totals(s.n_steps, s.n_tokens, s.n_real, s.n_missing, s.n_micro, s.t)


def pending_micro() -> int:
    """Micro-batches of the step in progress (training thread)."""
    return state.n_micro - state.c_micro


def commit() -> None:
    """The micro-batches since the last step are one more step: publish the totals.
    (`steps._after_step` writes this out for the steady optimizer step: change both.)"""
    s = state
    s.c_micro = micro = s.n_micro
    s.c_calls = s.n_calls
    s.last_ver = -1  # the next step's first batch is new data whatever it is
    s.n_steps = n = s.n_steps + 1
    # the one publication: a single C call, steps last in memory (see agent.ring)
    s.t = t = _monotonic()
    if s.any_tokens:
        _pack_totals(s.hdr, _TOTALS_AT, s.n_tokens, s.n_real, s.n_missing, micro, t, n)
    else:  # the token counts are unchanged (only a token tensor moves them, and sets any_tokens)
        _pack_step(s.hdr, _STEP_AT, micro, t, n)
    if step_listeners:
        for listener in tuple(step_listeners):
            call(listener, n)


def mark_tokens() -> None:
    """Say in the ring header that this process counts tokens (once, at the first tensor)."""
    state.hdr[ring_module.H_ANY_TOKENS * 8] = 1  # the low byte of a little-endian int64


def drain() -> None:
    """Sender thread: one `step` record for the steps committed since the last call.

    It runs twenty times a second whatever the loop does, so it does no JSON: the record's line
    is a template (`_line`) filled with `%`."""
    c = _unpack_totals(state.hdr, _TOTALS_AT)  # tokens, real, missing, micro, t, steps
    s = state.sent
    if c[5] == s.steps:
        return
    sender = get_sender()
    if sender is None:
        return
    k, micro = c[5] - s.steps, c[3] - s.micro
    if not state.any_tokens:
        numbers: tuple[Any, ...] = (c[4], k, c[5], micro)
    elif c[2] == s.real_missing and c[3] > s.micro:
        numbers = (c[4], k, c[5], micro, c[0] - s.tokens, c[1] - s.real)
    else:
        numbers = (c[4], k, c[5], micro, c[0] - s.tokens)
    forms = _lines.get(len(numbers))
    # a fork has its own pid, and a rank may be learned late (`Sender.learn_rank`)
    if forms is None or forms[0] is not sender or forms[1] != (sender.pid, sender.rank):
        forms = _lines[len(numbers)] = (sender, (sender.pid, sender.rank), _line(sender, len(numbers)))
    sender.send_line((forms[2] % numbers).encode(), kept=True)
    state.sent = Totals(c[5], c[0], c[1], c[2], c[3], c[4])


def _wake_on_step(n: int) -> None:
    """A step listener only while the sender is backed off (`_arm_wake`): this step's record
    goes at the sender's next tick, which comes back now. It removes itself: the steady step
    of a loop that keeps the sender busy calls no listener."""
    try:
        step_listeners.remove(_wake_on_step)
    except ValueError:  # taken off already
        pass
    sender = get_sender()
    if sender is not None:
        sender.wake()


def _arm_wake(sender: Any) -> None:
    """Sender thread, as it backs off (`sender.idle_listeners`): the next step wakes it. Its
    totals are published before the listeners run, so the tick it brings finds them."""
    if _wake_on_step not in step_listeners:
        step_listeners.append(_wake_on_step)


sender_module.idle_listeners.append(_arm_wake)


#: numbers given -> (the sender, its (pid, rank), the step line with holes for them)
_lines: dict[int, tuple[Any, tuple[int, Any], str]] = {}
#: Numbers no record holds: the stand-ins a template is encoded with, where its holes go.
_HOLE = 9_007_199_254_740_000


def _line(sender: Any, count: int) -> str:
    """The `step` record's JSON line with `%`-holes for (t, k, n, micro[, tokens[, real]]):
    built through the record's payload type (`payloads.STEP`) and `records.encode` once, with
    stand-in numbers where the holes go."""
    names = ("t", "k", "n", "micro", "tokens", "real_tokens")[:count]
    mark = {name: _HOLE + i for i, name in enumerate(names)}
    d = STEP.build(
        k=mark["k"], n=mark["n"], micro=mark["micro"],
        tokens=mark.get("tokens"), real_tokens=mark.get("real_tokens"),
    )
    record = records.make(STEP.name, d, t=mark["t"], src="agent", rank=sender.rank, pid=sender.pid)
    line = records.encode(record).replace("%", "%%")
    if [line.index(str(mark[name])) for name in names] != sorted(
        line.index(str(mark[name])) for name in names
    ):
        raise ValueError("a step line's numbers are not in the order they are filled in")
    for name in names:
        line = line.replace(str(mark[name]), "%r" if name == "t" else "%d", 1)
    return line


def bind_ring(ring: Any) -> None:
    """A new ring (at attach, or in a forked child): publish the totals there from now on. What
    this process inherited at fork is its base, so `tm` counts only this process's steps."""
    c = totals()  # whole steps: the step in progress is not the base's
    set_base(ring, c)
    _pack_totals(ring.mm, _TOTALS_AT, c.tokens, c.real, c.real_missing, c.micro, c.t, c.steps)
    state.hdr = ring.mm
    if state.any_tokens:
        mark_tokens()


def set_base(ring: Any, c: Totals) -> None:
    """What the ring's totals do not count as this process's own: its parent's, at the fork."""
    base = struct.Struct(f"<{ring_module.H_BASE_MICRO - ring_module.H_BASE_STEPS + 1}q")
    base.pack_into(
        ring.mm, ring_module.H_BASE_STEPS * 8, c.steps, c.tokens, c.real, c.real_missing, c.micro
    )


def forget_after_fork() -> None:
    """A forked child (a DataLoader worker) must not resend its parent's unsent steps."""
    s = state
    # the parent's step in progress is not the child's: its micro-batches so far become part
    # of what the child inherited, and the child's totals start from there
    s.c_micro = s.n_micro
    s.c_calls = s.n_calls
    ring = ring_module.active
    if ring is None or s.hdr is not ring.mm:  # never write into the parent's ring
        c = mine()
        s.hdr = bytearray(ring_module.HEADER_BYTES)
        _pack_totals(s.hdr, _TOTALS_AT, c.tokens, c.real, c.real_missing, c.micro, c.t, c.steps)
    s.sent = mine()
