"""Is DCGM on this node? If so, trainmeter does not arm GPM a second time.

DCGM's profiling module reads the same performance counters NVML GPM does on Hopper and newer,
and two clients perturb each other (Syllo/nvtop#483 warns of it). When a DCGM host engine or
exporter runs on the node, the GPU rows go without GPM and say why.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

DCGM_PROCESS_NAMES = frozenset({"nv-hostengine", "dcgm-exporter", "dcgm_exporter", "dcgmi"})


def live_process_names() -> Iterable[str]:
    try:
        import psutil
    except ImportError:
        return []
    names = []
    for proc in psutil.process_iter(["name"]):
        try:
            names.append(proc.info.get("name") or "")
        except Exception:  # noqa: BLE001 - a process that vanished or is hidden
            continue
    return names


def dcgm_reason(process_names: Callable[[], Iterable[str]] | None = None) -> str | None:
    """A reason not to arm GPM when a DCGM process runs here; None when none does."""
    try:
        names = set((process_names or live_process_names)())
    except Exception:  # noqa: BLE001 - cannot look: assume no DCGM
        return None
    found = sorted(names & DCGM_PROCESS_NAMES)
    if not found:
        return None
    return (
        f"DCGM runs on this node ({', '.join(found)}): it holds the profiling counters, so "
        "trainmeter does not arm GPM; read SM/tensor/DRAM activity from DCGM instead"
    )
