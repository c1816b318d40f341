"""Which optimizers step in each step during warm-up, and the period with which that repeats.

A loop whose steps differ in content has no representative single step: a DCGAN that steps the
discriminator twice per generator step (D, D, G) has steps alternating "D only" and "D plus G"
(each discriminator update begins a step, the generator's joins it: `steps._step`), a WGAN's
`n_critic=5` repeats every 5 steps. The counted FLOPs (`flops`) count one whole cycle of such
steps and divide by its length. This module watches the steps of warm-up only (its reader, the
flops probe's step listener, is gone once the count is made) and costs nothing in a steady step:
it reads the dict of optimizers of each step, which `steps._step` replaces rather than clears at
each new step, so the one kept from the last step holds every optimizer that stepped in it.

The period is the smallest P (at most `MAX_PERIOD`) such that the steps seen from the second on
(at least 2P of them) repeat with period P, the step now beginning is led by the optimizer that
led the step P before, and every
torch.optim optimizer alive in the process (`step_signal.made`) stepped in those steps: the
generator's optimizer of an n_critic loop is made before the loop and steps only every n_critic
steps, so a run of discriminator-only steps is no period of 1. One optimizer made, or none
(weights updated by hand): a period of 1 at once. Standard library only.
"""

from __future__ import annotations

from . import step_signal as signal
from .step_state import state

TYPE_CHECKING = False  # typing costs milliseconds in every Python the run starts
if TYPE_CHECKING:
    from typing import Any

MAX_PERIOD = 8
#: the last step at which a period may still be found: 2 * MAX_PERIOD steps seen whole after
#: the first
WATCH = 2 * MAX_PERIOD + 2

#: the optimizers (ids, in the order they stepped) of each whole step seen, oldest first
history: list[tuple[int, ...]] = []
_held: list[Any] = []  # the optimizers' dict of the step in progress, as `steps` holds it


def seen(n: int) -> None:
    """Step `n` began: the step before it is whole (its optimizers all stepped). Keep which."""
    if _held and len(history) < WATCH:
        history.append(tuple(_held[0]))
    _held[:] = [state.cycle]


def leader() -> int | None:
    """The optimizer that began the step in progress (None: no optimizer marks steps)."""
    cycle = _held[0] if _held else state.cycle
    return next(iter(cycle), None)


def period() -> int | None:
    """The repeat period of the steps seen so far, or None while none is found."""
    if signal.by_backward:
        return 1  # each backward is a step: nothing else to repeat
    alive = {id(o) for o in tuple(signal.made)}
    return find(history, alive, leader())


def idle() -> set[int]:
    """The optimizers made and alive that stepped in none of the steps watched (read once, at
    `WATCH`): one kept for a later phase of the script, or one stepping less often than the
    watch is long. They kept `period` from finding any: the steps are looked at again without
    them (`period_without`)."""
    stepped = {key for step in history for key in step}
    return {id(o) for o in tuple(signal.made)} - stepped


def period_without(unused: set[int]) -> int | None:
    """The repeat period of the steps watched, the optimizers in `unused` left out."""
    alive = {id(o) for o in tuple(signal.made)} - unused
    return find(history, alive, leader())


def find(steps_seen: list[tuple[int, ...]], alive: set[int], first: int | None) -> int | None:
    """The smallest P <= MAX_PERIOD with which `steps_seen` (each step's optimizers) repeats
    from its second step on, seen at least twice over (the first step may be odd: a G, D, D loop
    begins with G and the D that joins it), every optimizer of `alive` stepping in them, the
    step now beginning led by `first` as the step P before it was. Only the first step seen:
    a period of 1 when it holds every optimizer alive and the second begins as it did (one
    optimizer, or several that all step every step: the window of one step at `ARM_AFTER`)."""
    if len(steps_seen) == 1:
        body = steps_seen
        longest = 1
    else:
        body = steps_seen[1:]
        longest = min(MAX_PERIOD, len(body) // 2)
    for p in range(1, longest + 1):
        if any(body[i] != body[i + p] for i in range(len(body) - p)):
            continue
        if not alive <= {key for step in body for key in step}:
            continue
        before = body[-p]
        if before and before[0] != first:
            continue
        return p
    return None
