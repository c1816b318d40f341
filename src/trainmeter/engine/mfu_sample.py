"""MFU as `Engine.sample` hands it on: `mfu.section(..., detail=False).values`, with what does
not move with tokens/s made once per change of its inputs, and its own finiteness answer.

Between two samples of a replay only tokens/s moves; the entry's convention, GPU count, peak
names, precision note and the FLOPs per token of every convention follow from the FLOPs per
token entry, the peak, the GPU count, the model's shape, the convention registry and the
precision fact, which a sample reads as the same objects until they move (`FactStore.derived`,
`Engine._devices`). So the entry's head and those numbers are kept per version of them (a new
object, or another registry generation or precision, makes them again), and a sample adds only
the quotients, `mfu.section`'s arithmetic in its order (`per_token * per_s / whole`), so every
float is equal (tests/engine/test_mfu_sample.py).

Finiteness: the only floats in the entry that a sample makes are those quotients (and the
copied peak of another precision, added in): their sum is finite only when each one is, so
the sample's check (`finite_only`) can leave `mfu` out when it is.
"""

from __future__ import annotations

from typing import Any

from . import flops
from .flops import ModelShape, all_conventions
from .formulas import mfu as mfu_of


class MfuSampler:
    """`sample` with the template of the last inputs it saw."""

    __slots__ = ("_inputs", "_head", "_per_token", "_tail", "_other")

    def __init__(self) -> None:
        self._inputs: tuple[Any, ...] | None = None
        self._head: dict[str, Any] = {}  # convention, n_gpus, peak, peak_label, peak_source
        self._per_token: tuple[tuple[str, float], ...] | None = None  # by convention
        self._tail: dict[str, Any] = {}  # precision, precision_note
        self._other: tuple[str, dict[str, Any]] | None = None  # at_precision's peak

    def sample(
        self,
        flops_per_token: dict[str, Any] | None,
        tokens_per_s: float | None,
        peak: dict[str, Any] | None,
        n_gpus: int | None,
        shape: ModelShape | None,
        precision: tuple[str, str | None] | None,
    ) -> tuple[dict[str, Any], bool]:
        """(the section's values, whether every float in them is finite)."""
        if flops_per_token is None or not tokens_per_s or peak is None or not n_gpus:
            return {}, True  # absent: a sample hands on no reason
        value = flops_per_token["value"]
        inputs = (
            flops_per_token, peak, n_gpus, shape, flops.generation(), precision, value is None
        )
        known = self._inputs
        if (
            known is None or known[0] is not flops_per_token or known[1] is not peak
            or known[2] != n_gpus or known[3] is not shape or known[4] != inputs[4]
            or known[5] != precision or known[6] != inputs[6]
        ):
            self._remake(flops_per_token, peak, n_gpus, shape, precision)
            self._inputs = inputs
        per_s = tokens_per_s
        whole = n_gpus * peak["bf16_dense_flops"]
        entry = self._head.copy()
        if value is None:
            low, high = flops_per_token["range"][0], flops_per_token["range"][1]
            entry["range"] = [low * per_s / whole, high * per_s / whole]
            check = entry["range"][0] + entry["range"][1]
        else:
            check = entry["value"] = value * per_s / whole
        per_token = self._per_token
        if per_token is not None:
            by_convention = {}
            for name, flops_of in per_token:
                by_convention[name] = got = flops_of * per_s / whole
                check = check + got
            entry["by_convention"] = by_convention
        entry.update(self._tail)
        other = self._other
        if other is not None:
            name, spec = other
            at = mfu_of(value, tokens_per_s, n_gpus, spec["flops"])
            entry["at_precision"] = {
                "value": at,
                "precision": name,
                "peak_flops": spec["flops"],
                "peak_source": spec["source"],
                "label": f"utilization against the dense {name.upper()} peak (not MFU)",
            }
            if type(at) is float:
                check = check + at
            if type(spec["flops"]) is float:
                check = check + spec["flops"]
        return {"mfu": entry}, check - check == 0.0

    def _remake(
        self, fpt: dict[str, Any], peak: dict[str, Any], n_gpus: int, shape: ModelShape | None,
        precision: tuple[str, str | None] | None,
    ) -> None:
        """What the entry takes from the inputs alone: `mfu.section` and `mfu._precision`'s
        keys, values and order."""
        self._head = {
            "convention": fpt["convention"], "n_gpus": n_gpus, "peak": peak["name"],
            "peak_label": peak["label"], "peak_source": peak["source"],
        }
        self._per_token = None if shape is None else tuple(all_conventions(shape).items())
        self._other = None
        if precision is None:
            self._tail = {
                "precision": None,
                "precision_note": "not detected (no agent, or no training forward yet)",
            }
            return
        name, how = precision
        tail: dict[str, Any] = {"precision": name, "precision_note": how}
        other = (peak.get("other_precisions") or {}).get(name)
        if name == "bf16" or other is None or fpt.get("value") is None:
            if name != "bf16":
                tail["precision_note"] = (
                    f"{how}; MFU is against the dense BF16 peak; {peak['name']} has no "
                    f"{name.upper()} dense peak in its datasheet line, so no utilization at "
                    f"{name}"
                )
        else:
            self._other = (name, other)
        self._tail = tail
