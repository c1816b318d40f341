"""Where the wall time went: startup, data wait, checkpoints, eval, compute, after the last step.

    elapsed = startup + data + checkpoint + eval + comm + compute + after

Rank 0's first and last step records cut the wall time into three slots: before the first step,
the training window (to now while the run is live), and after the last step (once the run has
ended). Each measured phase second belongs to the slot it was recorded in, so a final eval or
checkpoint after the last step comes out of the tail, not out of compute, and the parts add up
to the elapsed time. Startup, compute and after are what is left of their slot. A part whose
probe never attached is not measured: its time stays inside the slot's remainder and the
compute label says so. `comm` is the clock rank's exposed wait for the other ranks in
collectives (the `comm` records; a wait inside an eval or checkpoint span stays in that span).
Goodput = (compute + data wait + waiting for other ranks, past the first step) / elapsed: the
time in steps, the waits a step needs included.
"""

from __future__ import annotations

from typing import Any

from . import explain
from .section import Section

#: (phase name, the probe that measures it, label)
MEASURED_PARTS = (
    ("data", "dataloader", "Data wait"),
    ("checkpoint", "checkpoint", "Checkpoints"),
    ("eval", "eval", "Eval"),
    ("comm", "collectives", "Waiting for other ranks"),
)
_PHASES = tuple(name for name, _, _ in MEASURED_PARTS)
#: Parts inside the steps: counted as training time in goodput (past the first step).
IN_STEPS = ("data", "comm")

#: Why a phase whose probe was attached has no seconds: the probe saw none of it. The views
#: say "not measured" with this reason rather than show a zero that reads as a timed one.
NONE_SEEN = {
    "data": "no DataLoader was iterated",
    "checkpoint": "nothing was saved with torch.save, save_pretrained, safetensors or "
    "torch.distributed.checkpoint",
    "eval": "the model never went to eval() and back to train()",
    "comm": "no collective was waited on in a step",
}


def _part(
    name: str, label: str, seconds: float | None, measured: bool, n: int | None = None
) -> dict[str, Any]:
    """One slice of the wall time; `n` (occurrences) only for a measured phase."""
    part: dict[str, Any] = {"name": name, "label": label, "s": seconds, "measured": measured}
    if n is not None and measured:
        part["n"] = n
    return part


class TimeLedger:
    #: `_layout`'s last answer and what it was worked out from
    _layout_memo: tuple[Any, frozenset[str], Any] | None = None

    def __init__(self) -> None:
        self.t_start: float | None = None
        self.t_end: float | None = None
        self.node_uptime_s: float | None = None
        self.phase_s: dict[str, float] = {}
        self.phase_n: dict[str, int] = {}
        self.first_t: float | None = None  # rank 0's first and latest step records
        self.last_t: float | None = None
        self.before: dict[str, float] = {}  # phase seconds recorded before the first step
        self.tail: dict[str, float] = {}  # phase seconds recorded after the latest step
        self._tail_t = float("-inf")

    def phase(self, name: str, seconds: float, n: int, t: float) -> None:
        self.phase_s[name] = self.phase_s.get(name, 0.0) + seconds
        self.phase_n[name] = self.phase_n.get(name, 0) + n
        if self.first_t is None or t <= self.first_t:
            self.before[name] = self.before.get(name, 0.0) + seconds
        elif self.last_t is not None and t > self.last_t:
            self.tail[name] = self.tail.get(name, 0.0) + seconds
            self._tail_t = max(self._tail_t, t)

    def step(self, t: float) -> None:
        """Rank 0's step record at `t`: the tail recorded before it joins the window."""
        if self.first_t is None:
            self.first_t = t
        if self.last_t is None or t > self.last_t:
            self.last_t = t
        if self.tail and t >= self._tail_t:  # an empty tail has nothing to clear
            self.tail.clear()

    def many(
        self,
        events: list[Any],
        data_at_steps: list[tuple[float, float]],
    ) -> None:
        """`phase(name, seconds, n, t)` for each tuple (name, seconds, n, t) and `step(t)` for
        each number t, in order, with the same state after it (tests/engine/
        test_feed_bulk.py): a replay's block hands its clock-rank phases and steps here in
        one call, the ledger's times kept in locals and stored once, the sums made in the
        same order. Each step also appends (t, the data-wait seconds so far) to
        `data_at_steps` (the data window's points, `alerts.DataWindow`). The tail's phases
        are kept aside as they come and summed into `tail` at the end, from the last step
        that cleared it: a log's phase between two steps joins the tail and the next step
        clears it, and a dict emptied and filled again at every step cost more than the sum."""
        phase_s, phase_n, before = self.phase_s, self.phase_n, self.before
        first, last, tail_t = self.first_t, self.last_t, self._tail_t
        at_step = data_at_steps.append
        data_s = phase_s.get("data", 0.0)  # `phase_s.get("data", 0.0)`, kept as it moves
        tailed: list[tuple[str, float, int, float]] = []  # the phases after the latest step
        keep = tailed.append
        has_tail, cleared, mark = bool(self.tail), False, 0  # tailed[mark:]: the tail's own
        for event in events:
            if type(event) is not tuple:  # a step's time: `step`
                t = event
                if first is None:
                    first = t
                if last is None or t > last:
                    last = t
                if has_tail and t >= tail_t:  # `tail.clear()`
                    has_tail, cleared, mark = False, True, len(tailed)
                at_step((t, data_s))
                continue
            name, seconds, n, t = event
            try:  # `phase_s.get(name, 0.0) + seconds`, without the call once the name is known
                phase_s[name] += seconds
                phase_n[name] += n
            except KeyError:
                phase_s[name] = 0.0 + seconds
                phase_n[name] = phase_n.get(name, 0) + n
            if name == "data":
                data_s = phase_s[name]
            if first is None or t <= first:
                before[name] = before.get(name, 0.0) + seconds
            elif last is not None and t > last:
                keep(event)
                has_tail = True
                if t > tail_t:  # max(tail_t, t): the first of equals stays
                    tail_t = t
        self.first_t, self.last_t, self._tail_t = first, last, tail_t
        tail = self.tail
        if cleared:
            tail.clear()
        for name, seconds, _, _ in tailed[mark:]:
            tail[name] = tail.get(name, 0.0) + seconds

    def section(
        self, t_last: float, now: float | None, probes: set[str], no_agent: str | None,
        world_size: int = 1,
        detail: bool = True,
    ) -> Section:
        """time: the split at `now` (None: at the latest record); `t_last` is the latest
        record's t. `no_agent` is why no agent spoke (None when one did). The wait for other
        ranks is a part only in a job of several ranks (or when its probe reported). `detail`
        False: goodput's explanation left out, for `Engine.sample`."""
        out = Section()
        split = self._split(t_last, now, probes, no_agent, out, world_size, detail)
        if split is not None:
            out.values["time"] = split
        return out

    def _data_measured(self, probes: set[str]) -> str | None:
        """None when the data wait is measured, else why not."""
        if "dataloader" not in probes:
            return "the DataLoader probe did not attach: the data wait is not measured (it is inside compute)"
        if not self.phase_n.get("data"):
            return (
                "no DataLoader was iterated (the loop loads its batches another way, e.g. "
                "from a memmap): the data wait is not measured (it is inside compute)"
            )
        return None

    def _layout(
        self, probes: set[str], world_size: int
    ) -> tuple[list[str], str | None, list[tuple[str, str, bool, str | None]], list[str], str]:
        """What of the split follows from the probes, the job's size and which phases were seen
        at all, not from their seconds: (the measured phases, why the data wait is not
        measured, each phase part's name, label, whether measured and its reason, the labels
        of those not measured, the compute part's label). Worked out again only when one of
        those moved: a replay's samples ask 2,000 times."""
        get = self.phase_n.get  # which of the phases were seen (`_PHASES`, written out)
        key = (world_size < 2, not get("data"), not get("checkpoint"), not get("eval"),
               not get("comm"))
        memo = self._layout_memo
        if memo is not None and memo[0] == key and memo[1] == probes:
            return memo[2]  # type: ignore[no-any-return]
        data_reason = self._data_measured(probes)
        names = [
            name
            for name, probe, _ in MEASURED_PARTS
            if probe in probes and (name != "data" or data_reason is None)
        ]
        layout: list[tuple[str, str, bool, str | None]] = []
        for name, probe, label in MEASURED_PARTS:
            if name == "comm" and name not in names and world_size < 2:
                continue  # one process: nobody to wait for
            reason: str | None = None
            if name not in names:
                reason = data_reason if name == "data" and data_reason else (
                    f"the {probe} probe did not attach"
                )
            elif not get(name):
                reason = NONE_SEEN[name]
            layout.append((name, label, name in names, reason))
        unmeasured = [label for _, label, is_measured, _ in layout if not is_measured]
        compute_label = "Compute"
        if unmeasured:
            compute_label += " and the rest (includes " + ", ".join(unmeasured).lower() + ")"
        answer = (names, data_reason, layout, unmeasured, compute_label)
        self._layout_memo = (key, frozenset(probes), answer)
        return answer

    def _split(
        self,
        t_last: float,
        now: float | None,
        probes: set[str],
        no_agent: str | None,
        out: Section,
        world_size: int = 1,
        detail: bool = True,
    ) -> dict[str, Any] | None:
        absent = out.absent
        if self.t_start is None:
            absent["time"] = "no run.start record: replay a complete events.jsonl"
            return None
        finished = self.t_end is not None
        # max(a, b) and min(a, b) written out as the builtins answer (b only when strictly
        # greater, or smaller): a call each is most of this part's cost in a replay's samples
        if self.t_end is not None:
            end = self.t_end
        else:
            end = now or 0.0
            if t_last > end:
                end = t_last
        elapsed = end - self.t_start
        if 0.0 > elapsed:
            elapsed = 0.0
        split: dict[str, Any] = {"elapsed_s": elapsed, "finished": finished}
        if self.node_uptime_s is not None:
            split["node_uptime_s"] = self.node_uptime_s
        first, last = self.first_t, self.last_t
        if first is None or last is None:
            absent["time_split"] = no_agent or (
                "no optimizer step seen: the agent's step probe needs the loop to use a "
                "torch.optim optimizer"
            )
            return split
        # the training window lies inside the run, whatever a step record claimed
        if self.t_start > first:
            first = self.t_start
        if end < first:
            first = end
        if finished:
            window_end = last
        else:
            window_end = last if last > end else end
        if end < window_end:
            window_end = end
        names, data_reason, layout, unmeasured, compute_label = self._layout(probes, world_size)
        if data_reason is not None:
            absent["time.data"] = data_reason
        # plain loops, no comprehension (each is a call of its own; a replay asks 2,000 times),
        # each sum from 0 in the names' order, as `sum` adds
        phase_s, before_s, tail_s = self.phase_s, self.before, self.tail
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
        startup = first - self.t_start - before
        if 0.0 > startup:
            startup = 0.0
        compute = window_end - first - (total - before - after)
        if 0.0 > compute:
            compute = 0.0
        in_steps_rest: dict[str, float] = {}  # the waits a step needs, past the first step
        for name in IN_STEPS:
            if name in measured:
                rest_s = measured[name] - before_s.get(name, 0.0) - (
                    tail_s.get(name, 0.0) if finished else 0.0)
                in_steps_rest[name] = 0.0 if 0.0 > rest_s else rest_s  # max(rest_s, 0.0)
        # `_part` written out (a call each)
        parts = [{"name": "startup", "label": "Startup and compile", "s": startup,
                  "measured": True}]
        phase_n = self.phase_n
        for name, label, is_measured, reason in layout:
            part = {"name": name, "label": label, "s": measured.get(name), "measured": is_measured}
            if is_measured:
                part["n"] = phase_n.get(name, 0)
            if reason is not None:
                part["reason"] = reason
            parts.append(part)
        parts.append({"name": "compute", "label": compute_label, "s": compute, "measured": False})
        if finished:
            tail = max(end - window_end - after, 0.0)
            parts.append(_part("after", "After the last step", tail, True))
        split["parts"] = parts
        split["remainder_includes"] = list(unmeasured)
        if elapsed > 0:
            rest: float = 0
            for seconds in in_steps_rest.values():
                rest = rest + seconds
            goodput = (compute + rest) / elapsed  # a share
            if 1.0 < goodput:
                goodput = 1.0
            split["goodput"] = goodput
            if detail:
                out.explain["goodput"] = _explain_goodput(goodput, compute, elapsed, in_steps_rest)
        else:
            absent["goodput"] = "no wall time has passed yet"
        return split


_GOOD = {
    "data": ("data_after_first_step_s", "measured by the DataLoader probe after the first step"),
    "comm": ("comm_after_first_step_s",
             "measured by the collectives probe (rank's exposed waits) after the first step"),
}


def _explain_goodput(
    goodput: float, compute: float, elapsed: float, rest: dict[str, float]
) -> dict[str, Any]:
    parts_note = "startup, " + ", ".join(
        label.lower() for name, _p, label in MEASURED_PARTS if name not in IN_STEPS
    )
    inputs = [
        explain.given("compute_s", compute, "s",
                      "measured: the training window less the measured phases in it"),
    ]
    terms = ["compute_s"]
    for name, seconds in rest.items():
        key, source = _GOOD[name]
        inputs.append(explain.given(key, seconds, "s", source))
        terms.append(key)
    inputs.append(explain.given("elapsed_s", elapsed, "s", "wall time from tm's run.start"))
    formula = f"({' + '.join(terms)}) / elapsed_s" if len(terms) > 1 else "compute_s / elapsed_s"
    return explain.explanation(
        goodput, "fraction", formula, inputs,
        note=f"the share of the wall time spent training; {parts_note} and the time "
        "after the last step count as time not spent training",
    )
