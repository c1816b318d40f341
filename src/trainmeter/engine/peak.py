"""Which dense peak MFU divides by, and where it comes from.

Invariant 5: every peak is dense and cited, and a card with no cited dense peak gets no MFU,
never one borrowed from another card. The order: a `peak_flops` fact (declared with
--peak-tflops, or measured), else a measured peak the GPU sampler found for these GPUs, else the
datasheet line for the card. All GPUs must be one model; mixing two specs is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from .facts import FactStore

if TYPE_CHECKING:
    from ..hardware.specs import DeviceSpec

ENABLE = (
    "measure it (python -m trainmeter.hardware.measure_peak) or declare --peak-tflops with --peak-source"
)


def one_spec(
    names: Iterable[str], lookup: Callable[[str], DeviceSpec | None]
) -> tuple[DeviceSpec | None, str | None]:
    """The spec all `names` share, or None with the reason."""
    distinct = sorted({n for n in names if n})
    if not distinct:
        return None, "the GPU model is unknown (no device fact and no GPU sample)"
    if len(distinct) > 1:
        return None, "GPUs of different models (" + ", ".join(distinct) + "): one spec is needed"
    spec = lookup(distinct[0])
    if spec is None:
        return None, f"{distinct[0]} is not in the spec table"
    return spec, None


def choose(
    facts: FactStore,
    names: list[str],
    measured_rows: list[tuple[float, str | None]],
    lookup: Callable[[str], DeviceSpec | None],
) -> tuple[dict[str, Any] | None, DeviceSpec | None, str | None]:
    """(peak entry for the snapshot, the card's spec, reason when there is no peak)."""
    spec, spec_reason = one_spec(names, lookup)
    distinct = sorted({n for n in names if n})
    mixed = len(distinct) > 1
    device_name = spec.name if spec is not None else (distinct[0] if len(distinct) == 1 else None)
    hbm = spec.hbm_bytes_per_s if spec is not None else None

    def entry(flops: float, source: str | None, label: str) -> dict[str, Any]:
        return {
            "name": device_name or f"{label} peak",
            "key": spec.key if spec is not None else None,
            "bf16_dense_flops": flops,
            "hbm_bytes_per_s": hbm,
            "ridge": flops / hbm if hbm else None,
            "source": source,
            "label": label,
            "other_precisions": {
                p: {"flops": f, "source": spec.sources.get(f"{p}_dense_tflops")}
                for p, f in (spec.dense_flops if spec is not None else {}).items()
            },
        }

    fact = facts.get("peak_flops")
    value = facts.number("peak_flops")
    if fact is not None and value is not None and value > 0:
        label = fact.source  # "declared" or "measured"; any other source is named as is
        source = fact.note or (
            "declared with --peak-tflops" if fact.source == "declared" else "measured"
        )
        return entry(value, source, label), spec, None
    if mixed:
        return None, None, spec_reason
    peaks = [p for p in measured_rows if p[0] > 0]
    if peaks:
        mean = sum(p[0] for p in peaks) / len(peaks)
        source = next((p[1] for p in peaks if p[1]), None) or "measured on this GPU"
        return entry(mean, source, "measured"), spec, None
    if spec is None:
        return None, None, f"{spec_reason}: {ENABLE}"
    if spec.bf16_dense_flops is None:
        return None, spec, f"{spec.name} has no published dense BF16 peak: {ENABLE}"
    return entry(spec.bf16_dense_flops, spec.source, "datasheet"), spec, None
