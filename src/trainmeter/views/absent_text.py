"""The absent numbers grouped by their reason, one line a reason, for every view that lists them.

The engine says why each number is missing, and several numbers miss for one cause: a CPU run
has no NVML for the ladder, OFU, energy and the counters alike. Their reasons are often one
sentence with a different lead (`no GPU counters: NVML library not found ...` and `NVML library
not found ...`; `no dense peak to divide by: the GPU model is unknown ...` and `no dense peak:
the GPU model is unknown ...`). Two reasons are one when, past a leading clause ending in ": ",
they say the same; the group is shown with the shortest of its wordings.
"""

from __future__ import annotations


def _core(reason: str) -> str:
    """The reason past its leading clause: `no GPU counters: NVML ...` -> `NVML ...`."""
    head, sep, rest = reason.partition(": ")
    return rest if sep and len(rest) >= 20 else reason


def grouped(absent: dict[str, str]) -> list[tuple[str, list[str]]]:
    """[(reason, names)] in the order each cause is first met; near-duplicate wordings of one
    cause are one group, shown with the shortest wording."""
    groups: list[tuple[list[str], list[str]]] = []  # (wordings, names)
    where: dict[str, int] = {}  # a wording or a core -> its group
    for name, reason in absent.items():
        text = " ".join(str(reason).split())
        core = _core(text)
        index = where.get(text, where.get(core))
        if index is None:
            index = len(groups)
            groups.append(([], []))
        wordings, names = groups[index]
        if text not in wordings:
            wordings.append(text)
        names.append(str(name))
        where.setdefault(text, index)
        where.setdefault(core, index)
    return [(min(wordings, key=len), names) for wordings, names in groups]
