"""The time split as `Engine.sample` hands it on: `TimeLedger.section(..., detail=False).values`,
made without the section, its absent reasons or a new dict for a part that cannot move, and
with its own finiteness answer.

A replay takes ~2,000 samples, and between two of them the phases' seconds, their counts, the
elapsed time and goodput move, nothing else while the layout (`TimeLedger._layout`: the probes,
the job's size, which phases were seen) stays: the parts of a phase not measured (its probe
did not attach) are the same dicts from one sample to the next, made once per layout. The
arithmetic is `TimeLedger._split`'s, line for line in the same order, so every float is equal
(tests/engine/test_timesplit_sample.py holds the two equal).

Finiteness: every float this part gives is one of the few it works out here (the elapsed time,
the node's uptime, startup, each measured phase, compute, the time after the last step,
goodput), so their sum says at once whether all are finite: an infinity or a NaN among them
makes the sum one too, and a sum that overflows from finite terms only sends the sample to the
whole check (`finite_only`) it would have had anyway. The sample's check then leaves `time`
out (`Engine.sample`).
"""

from __future__ import annotations

from typing import Any

from .timesplit import IN_STEPS, TimeLedger


class SplitSampler:
    """`sample` with what it keeps between calls: the constant parts of the last layout."""

    __slots__ = ("_layout", "_fixed")

    def __init__(self) -> None:
        self._layout: Any = None  # the `_layout` answer the fixed parts were made for
        self._fixed: dict[str, dict[str, Any]] = {}  # name -> a part that cannot move

    def sample(
        self, ledger: TimeLedger, t_last: float, now: float | None, probes: set[str],
        world_size: int,
    ) -> tuple[dict[str, Any], bool]:
        """(the section's values, whether every float in them is finite)."""
        t_start = ledger.t_start
        if t_start is None:
            return {}, True
        t_end = ledger.t_end
        finished = t_end is not None
        if finished:
            end = t_end
        else:
            end = now or 0.0
            if t_last > end:
                end = t_last
        elapsed = end - t_start
        if 0.0 > elapsed:
            elapsed = 0.0
        split: dict[str, Any] = {"elapsed_s": elapsed, "finished": finished}
        uptime = ledger.node_uptime_s
        check = elapsed
        if uptime is not None:
            split["node_uptime_s"] = uptime
            check = check + uptime
        first, last = ledger.first_t, ledger.last_t
        if first is None or last is None:
            return {"time": split}, check - check == 0.0
        if t_start > first:
            first = t_start
        if end < first:
            first = end
        if finished:
            window_end = last
        else:
            window_end = last if last > end else end
        if end < window_end:
            window_end = end
        answer = ledger._layout(probes, world_size)
        names, _, layout, unmeasured, compute_label = answer
        if answer is not self._layout:
            self._layout = answer
            self._fixed = {
                name: {"name": name, "label": label, "s": None, "measured": False,
                       "reason": reason}
                for name, label, is_measured, reason in layout
                if not is_measured and name not in names
            }
        phase_s, before_s, tail_s = ledger.phase_s, ledger.before, ledger.tail
        measured: dict[str, float] = {}
        before: float = 0
        after: float = 0
        total: float = 0
        for name in names:
            seconds = measured[name] = phase_s.get(name, 0.0)
            total = total + seconds
            before = before + before_s.get(name, 0.0)
            if finished:
                after = after + tail_s.get(name, 0.0)
        if not finished:
            after = 0.0
        startup = first - t_start - before
        if 0.0 > startup:
            startup = 0.0
        compute = window_end - first - (total - before - after)
        if 0.0 > compute:
            compute = 0.0
        in_steps_rest: dict[str, float] = {}
        for name in IN_STEPS:
            if name in measured:
                rest_s = measured[name] - before_s.get(name, 0.0) - (
                    tail_s.get(name, 0.0) if finished else 0.0)
                in_steps_rest[name] = 0.0 if 0.0 > rest_s else rest_s
        parts: list[dict[str, Any]] = [
            {"name": "startup", "label": "Startup and compile", "s": startup, "measured": True}
        ]
        fixed, phase_n = self._fixed, ledger.phase_n
        for name, label, is_measured, reason in layout:
            part = fixed.get(name)
            if part is None:
                part = {"name": name, "label": label, "s": measured.get(name),
                        "measured": is_measured}
                if is_measured:
                    part["n"] = phase_n.get(name, 0)
                if reason is not None:
                    part["reason"] = reason
            parts.append(part)
        parts.append({"name": "compute", "label": compute_label, "s": compute, "measured": False})
        check = check + startup + total + compute
        if finished:
            tail = max(end - window_end - after, 0.0)
            parts.append(
                {"name": "after", "label": "After the last step", "s": tail, "measured": True}
            )
            check = check + tail
        split["parts"] = parts
        split["remainder_includes"] = list(unmeasured)
        if elapsed > 0:
            rest: float = 0
            for seconds in in_steps_rest.values():
                rest = rest + seconds
            goodput = (compute + rest) / elapsed
            if 1.0 < goodput:
                goodput = 1.0
            split["goodput"] = goodput
            check = check + goodput
        return {"time": split}, check - check == 0.0
