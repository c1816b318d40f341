"""The GPU counters as `Engine.sample` hands them on when its readers read none of the derived
numbers (flops_observed, mfu_ofu_gap, arithmetic intensity: the history's case): the ladder,
the rows and OFU of `GpuCounters.section(..., detail=False, keys=...)`'s values, in one pass
without the section, its absent reasons, the properties' calls or a list per rung, and with its
own finiteness answer.

The arithmetic is `GpuCounters._ladder`'s and `_ofu`'s in their order: each mean a sum from 0
in the covered GPUs' order over their count (`sum(values) / len(values)`), OFU the same over the
GPUs with a moving average, so every float is equal (tests/engine/test_counters_sample.py).

Finiteness: a row's numbers are finite where they enter (`GpuCounters._row` keeps a field only
when `num` reads a finite number from it, and keeps the row's own int or float), and so are the
rungs read from them; the floats made from them (each GPU's OFU, the means, OFU's average, and
MFU's value copied in) are summed, and the sum is finite only when each one is. A GPU whose
name is not a string or None leaves the answer to the whole check (`finite_only`).
"""

from __future__ import annotations

from typing import Any

from .counters import LADDER, GpuCounters

_NOTE = (
    "scaled to the max SM clock: the spec states no tensor clock for the dense peak, so OFU is "
    "not compared with MFU"
)


def sample(
    counters: GpuCounters, covered: list[Any] | None, mfu: float | None
) -> tuple[dict[str, Any], bool]:
    """(ladder, gpus and ofu as the section gives them, whether every float in them is
    finite); `mfu`: MFU's value (None without one)."""
    values: dict[str, Any] = {}
    check: float = 0.0
    named = True  # every GPU's name a string or None
    gpus = counters._covered(covered)
    if counters.unavailable is None and counters._gpus:
        every = counters._every()
        per_gpu: dict[str, dict[str, float]] = {}
        rows: dict[str, dict[str, Any]] = {}
        labels = None if gpus is every else {g.label for g in gpus}
        for g in every:
            if g.latest is not None:
                g._settle()
            rungs = g._rungs
            if "ofu" in rungs:
                check = check + rungs["ofu"]
            if mfu is None or (labels is not None and g.label not in labels):
                per_gpu[g.label] = rungs.copy()
            else:
                per_gpu[g.label] = {**rungs, "mfu": mfu}
            row = g._row
            name = row.get("name")
            if name is not None and type(name) is not str:
                named = False
            rows[g.label] = row.copy()
        covers: list[str] = []
        got: dict[str, list[float]] = {}  # rung -> the covered GPUs' values, in their order
        for g in gpus:
            covers.append(g.label)
            for rung, value in g._rungs.items():
                if rung in got:
                    got[rung].append(value)
                else:
                    got[rung] = [value]
        mean: dict[str, float] = {}
        for rung in LADDER:
            rung_values = got.get(rung)
            if rung_values:
                total: float = 0
                for value in rung_values:
                    total = total + value
                mean[rung] = got_mean = total / len(rung_values)
                check = check + got_mean
        if mfu is not None:
            mean["mfu"] = mfu
            if type(mfu) is float:
                check = check + mfu
        values["ladder"] = {"gpus": per_gpu, "mean": mean, "mfu": mfu, "covers": covers}
        values["gpus"] = rows
    labels_counted: list[str] = []
    ofu_total: float = 0
    comparable = True
    for g in gpus:
        ofu = g.ofu.value
        if ofu is not None:
            labels_counted.append(g.label)
            ofu_total = ofu_total + ofu
            if not g.comparable:
                comparable = False
    if labels_counted:
        value = ofu_total / len(labels_counted)
        check = check + value
        entry: dict[str, Any] = {
            "value": value, "convention": "counters", "source": "measured",
            "comparable_with_mfu": comparable, "gpus": labels_counted,
        }
        if not comparable:
            entry["note"] = _NOTE
        values["ofu"] = entry
    return values, named and check - check == 0.0
