"""Counters the agent's pieces share inside one process (standard library only).

The optimizer step count is not here: the step probe keeps it (`probes.steps.step_count()`), and
`emit()` and the taps read it from there, so the step hook writes it once.
"""

from __future__ import annotations


class AgentState:
    __slots__ = ("probes", "taps_enabled")

    def __init__(self) -> None:
        self.probes: list[str] = []  # probes that attached, reported in `hello`
        self.taps_enabled = True


STATE = AgentState()
