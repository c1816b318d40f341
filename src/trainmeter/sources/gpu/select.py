"""Which GPUs belong to the run: the flag, else CUDA_VISIBLE_DEVICES, else the process tree's
GPUs as NVML lists them, else all of them.

CUDA's own rules for CUDA_VISIBLE_DEVICES are followed: entries are indices, full or prefix
`GPU-` UUIDs, or `MIG-` UUIDs (which select their parent GPU here, since NVML counters are per
physical GPU); the list ends at the first entry that matches nothing; an empty value hides every
GPU. Indices in CUDA_VISIBLE_DEVICES are CUDA's order, which equals NVML's (PCI bus) order only
with CUDA_DEVICE_ORDER=PCI_BUS_ID or when all GPUs are one model; the selection says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Device:
    index: int
    uuid: str
    mig_uuids: tuple[str, ...] = ()
    name: str = ""


@dataclass
class Selection:
    indices: list[int]
    selected_by: str  # "flag", "env", "process", "all"
    note: str = ""
    unmatched: list[str] = field(default_factory=list)


def parse_gpus_flag(text: str) -> list[str]:
    """`--gpus 0,1` or `--gpus GPU-ab12,GPU-cd34` -> entries; ValueError with a one-line reason."""
    entries = [e.strip() for e in text.split(",") if e.strip()]
    if not entries:
        raise ValueError("--gpus needs indices or UUIDs, e.g. --gpus 0,1")
    for entry in entries:
        if not (entry.isdigit() or entry.startswith(("GPU-", "MIG-"))):
            raise ValueError(f"--gpus: {entry!r} is neither an index nor a GPU-/MIG- UUID")
    return entries


def _match(entry: str, devices: list[Device]) -> Device | None:
    if entry.isdigit():
        wanted = int(entry)
        return next((d for d in devices if d.index == wanted), None)
    if entry.startswith("GPU-"):
        hits = [d for d in devices if d.uuid.startswith(entry)]
        return hits[0] if len(hits) == 1 else None
    if entry.startswith("MIG-"):
        hits = [d for d in devices if any(m.startswith(entry) for m in d.mig_uuids)]
        return hits[0] if len(hits) == 1 else None
    return None


def _resolve(entries: list[str], devices: list[Device], stop_at_unmatched: bool):
    chosen: list[int] = []
    unmatched: list[str] = []
    for entry in entries:
        dev = _match(entry, devices)
        if dev is None:
            unmatched.append(entry)
            if stop_at_unmatched:
                break
            continue
        if dev.index not in chosen:
            chosen.append(dev.index)
    return chosen, unmatched


def select(
    devices: list[Device],
    flag: str | list[str] | None = None,
    env: Mapping[str, str] | None = None,
    tree_pids: Iterable[int] = (),
    gpu_pids: Mapping[int, Iterable[int]] | None = None,
) -> Selection:
    """The GPUs to sample. `gpu_pids` maps NVML index -> pids NVML lists as compute processes."""
    env = env or {}
    if flag:
        try:
            entries = flag if isinstance(flag, list) else parse_gpus_flag(flag)
        except ValueError as exc:  # `tm` validates the flag first; a sampler never raises
            return Selection([], "flag", str(exc), [str(flag)])
        chosen, unmatched = _resolve(entries, devices, stop_at_unmatched=False)
        note = f"--gpus entries not found: {', '.join(unmatched)}" if unmatched else ""
        return Selection(chosen, "flag", note, unmatched)
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None:
        entries = [e.strip() for e in cvd.split(",")] if cvd.strip() else []
        chosen, unmatched = _resolve(entries, devices, stop_at_unmatched=True)
        notes = []
        if not entries:
            notes.append("CUDA_VISIBLE_DEVICES is empty: the run sees no GPU")
        if unmatched:
            notes.append(f"CUDA_VISIBLE_DEVICES stops at {unmatched[0]!r} (matches no GPU)")
        if any(e.isdigit() for e in entries) and env.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID":
            if len({d.name for d in devices}) > 1:
                notes.append(
                    "CUDA_VISIBLE_DEVICES indices follow CUDA's fastest-first order, which may "
                    "differ from NVML's on mixed GPUs (set CUDA_DEVICE_ORDER=PCI_BUS_ID)"
                )
        return Selection(chosen, "env", "; ".join(notes), unmatched)
    pids = set(tree_pids)
    if pids and gpu_pids:
        chosen = sorted(i for i, holders in gpu_pids.items() if pids.intersection(holders))
        if chosen:
            return Selection(chosen, "process")
    return Selection([d.index for d in devices], "all")
