"""Where the wall time went: startup, data wait, checkpoints, eval, compute, after the last step.

    elapsed = startup + data + checkpoint + eval + compute + after

Startup runs from the start of the run to rank 0's first step record, less the data wait the
loader probe measured before it. The training window runs from that first step to the last one
(to now while the run is live); compute is what is left of it after the measured data wait
(past the first step), checkpoints and evals. A part whose probe never attached is not
measured: its time stays inside compute and the compute label says so. After the last step is
the tail once the run has ended. Goodput = (compute + data wait past the first step) / elapsed.
"""

from __future__ import annotations

from typing import Any

#: (phase name, the probe that measures it, label)
MEASURED_PARTS = (
    ("data", "dataloader", "Data wait"),
    ("checkpoint", "checkpoint", "Checkpoints"),
    ("eval", "eval", "Eval"),
)


def _part(
    name: str, label: str, seconds: float | None, measured: bool, n: int | None = None
) -> dict[str, Any]:
    """One slice of the wall time; `n` (occurrences) only for a measured phase."""
    part: dict[str, Any] = dict(name=name, label=label, s=seconds, measured=measured)
    if n is not None and measured:
        part["n"] = n
    return part


class TimeLedger:
    def __init__(self) -> None:
        self.t_start: float | None = None
        self.t_end: float | None = None
        self.node_uptime_s: float | None = None
        self.phase_s: dict[str, float] = {}
        self.phase_n: dict[str, int] = {}
        self.data_before_first = 0.0

    def phase(self, name: str, seconds: float, n: int) -> None:
        self.phase_s[name] = self.phase_s.get(name, 0.0) + seconds
        self.phase_n[name] = self.phase_n.get(name, 0) + n

    def first_step(self) -> None:
        """Called at rank 0's first step: the data wait so far belongs to startup."""
        self.data_before_first = self.phase_s.get("data", 0.0)

    def snapshot(
        self,
        first: float | None,
        last: float | None,
        t_last: float,
        now: float | None,
        probes: set[str],
        absent: dict[str, str],
    ) -> dict[str, Any] | None:
        if self.t_start is None:
            absent["time"] = "no run.start record: replay a complete events.jsonl"
            return None
        finished = self.t_end is not None
        end = self.t_end if self.t_end is not None else max(now or 0.0, t_last)
        elapsed = max(end - self.t_start, 0.0)
        out: dict[str, Any] = {"elapsed_s": elapsed, "finished": finished}
        if self.node_uptime_s is not None:
            out["node_uptime_s"] = self.node_uptime_s
        if first is None or last is None:
            absent["time_split"] = (
                "no optimizer step seen: the agent's step probe needs the loop to use a "
                "torch.optim optimizer (or run without --no-agent)"
            )
            return out
        window_end = last if finished else max(end, last)
        window = max(window_end - first, 0.0)
        measured = {
            name: self.phase_s.get(name, 0.0)
            for name, probe, _ in MEASURED_PARTS
            if probe in probes
        }
        before = min(self.data_before_first, max(first - self.t_start, 0.0))
        data_rest = max(measured.get("data", 0.0) - self.data_before_first, 0.0)
        in_window = sum(v for k, v in measured.items() if k != "data")
        startup = max(first - self.t_start - before, 0.0)
        compute = max(window - data_rest - in_window, 0.0)
        parts = [_part("startup", "Startup and compile", startup, True)]
        parts += [
            _part(name, label, measured.get(name), name in measured, self.phase_n.get(name, 0))
            for name, _probe, label in MEASURED_PARTS
        ]
        unmeasured = [p["label"] for p in parts if not p["measured"]]
        compute_label = "Compute"
        if unmeasured:
            compute_label += " and the rest (includes " + ", ".join(unmeasured).lower() + ")"
        parts.append(_part("compute", compute_label, compute, False))
        if finished:
            parts.append(_part("after", "After the last step", max(end - window_end, 0.0), True))
        out["parts"] = parts
        out["remainder_includes"] = unmeasured
        if elapsed > 0:
            out["goodput"] = (compute + data_rest) / elapsed
        else:
            absent["goodput"] = "no wall time has passed yet"
        return out
