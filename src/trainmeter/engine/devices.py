"""Which GPUs the run trains on, how many MFU divides by, and the dense peak per GPU.

The training process names its GPUs (the agent's `device` fact); the GPU sampler watches the
GPUs it could tie to the training processes, or all of them when it could not (most
containers hide the processes). MFU divides by the GPUs the training uses, so the counters
(ladder mean, OFU, observed FLOPs, energy) are taken over those same GPUs: `covered` says which
of the sampled GPUs they are. An idle GPU beside a busy one then does not halve OFU.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import peak
from .counters import GpuCounters
from .facts import FactStore
from .section import Section

if TYPE_CHECKING:
    from ..hardware.specs import DeviceSpec


class Devices:
    """What `section` found (a plain record: `dataclasses` is slow to import)."""

    __slots__ = ("section", "peak", "peak_reason", "n_gpus", "n_gpus_source", "covered")

    def __init__(
        self,
        section: Section,
        peak: dict[str, Any] | None,
        peak_reason: str | None,
        n_gpus: int | None,
        n_gpus_source: str | None,
        covered: list[Any] | None,  # sampled GPU idents the counters cover; None: every one
    ) -> None:
        self.section = section
        self.peak = peak
        self.peak_reason = peak_reason
        self.n_gpus = n_gpus
        self.n_gpus_source = n_gpus_source
        self.covered = covered


def match(trained: dict[Any, dict[str, Any]], sampled: dict[Any, dict[str, Any]]) -> list[Any]:
    """The sampled GPUs (their idents) that are the training process's devices: by UUID, and by
    index only for a device reported without one."""
    by_index = {d.get("index"): ident for ident, d in sampled.items()}
    found: list[Any] = []
    for dev in trained.values():
        uuid = dev.get("uuid")
        ident = uuid if uuid in sampled else None if uuid else by_index.get(dev.get("index"))
        if ident is not None and ident not in found:
            found.append(ident)
    return found


def section(
    facts: FactStore,
    trained: dict[Any, dict[str, Any]],
    gpu: GpuCounters,
    lookup: Callable[[str], DeviceSpec | None],
) -> Devices:
    """peak, devices, n_gpus, gpu_versions."""
    out = Section()
    if trained:
        names = [str(d.get("name")) for d in trained.values() if d.get("name")]
        source = "detected"
        visible = trained
    else:
        names = [str(d.get("name")) for d in gpu.devices.values() if d.get("name")]
        by = gpu.selected_by
        source = "detected" if by == "process" else "declared" if by == "flag" else "assumed"
        visible = gpu.devices
    measured = list(gpu.measured_peaks.values())
    peak_entry, _spec, peak_reason = facts.derived(  # the same GPUs: the same peak
        "peak", lambda: peak.choose(facts, names, measured, lookup),
        (names, measured, lookup),
    )
    if peak_entry is not None:
        peak_entry = dict(peak_entry)  # the snapshot's own
        out.values["peak"] = peak_entry
    else:
        out.absent["peak"] = peak_reason or "no GPU"
    if visible:
        out.values["devices"] = [
            {"name": d.get("name"), "index": d.get("index"), "uuid": d.get("uuid")}
            for d in visible.values()
        ]
    n_gpus = len(visible) or None
    if n_gpus is None:
        out.absent["n_gpus"] = (
            "no device fact from the agent and no GPU sample (NVML): see tm doctor, or give --gpus"
        )
    else:
        out.values["n_gpus"] = {"value": n_gpus, "source": source}
        if source == "assumed":
            out.warnings.append(
                "the training process did not report its GPUs, so the GPU count and model "
                "are the visible devices"
            )
    if gpu.versions:
        out.values["gpu_versions"] = gpu.versions
    covered: list[Any] | None = None
    if trained and gpu.devices:
        covered = match(trained, gpu.devices)
        if not covered:
            covered = None
            out.warnings.append(
                "none of the GPUs the training process reported is among the sampled GPUs: "
                "the GPU counters cover every sampled GPU, MFU only the training's"
            )
        elif len(covered) < len(trained):
            out.warnings.append(
                f"only {len(covered)} of the {len(trained)} GPUs the training reported are "
                "sampled: the GPU counters cover those, MFU all of them"
            )
    return Devices(out, peak_entry, peak_reason, n_gpus, source if n_gpus else None, covered)
