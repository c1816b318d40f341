"""Counters the agent's pieces share inside one process (standard library only).

The step probe advances `step`; `emit()` stamps values with it so a series can be drawn against
optimizer steps even when the loop never says which step it is on.
"""

from __future__ import annotations


class AgentState:
    __slots__ = ("step", "probes", "taps_enabled")

    def __init__(self) -> None:
        self.step = 0  # optimizer steps seen in this process
        self.probes: list[str] = []  # probes that attached, reported in `hello`
        self.taps_enabled = True


STATE = AgentState()
