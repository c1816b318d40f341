"""Memory of this rank, from the caching allocator's host-side statistics, about once a second.

Why it reads what it reads:

- On CUDA, `torch.cuda.memory_stats(index)` returns the caching allocator's own counters
  (allocated and reserved bytes, current and peak, retries, OOMs) kept in host memory: no kernel
  is launched and no stream is waited on (promise 1). The card's total is
  `get_device_properties(index).total_memory`, cached by torch; `mem_get_info` would ask the
  driver, so it is not used. CUDA is looked at only once the user initialized it.
- On MPS, `torch.mps` gives the allocator's current and driver bytes and the recommended
  maximum; on CPU there is no caching allocator, only the process's resident memory. What a
  device cannot give is named in `missing` with the reason, never sent as zero.
- Read after an optimizer step when one is due (the allocated bytes then are what lives between
  steps: weights, gradients, optimizer state; the peak above them is the step's transient
  memory, mostly activations), else by the sender thread (before training, or while hung).
  Whether one is due is the sender thread's question, asked on its clock: it puts the step
  listener on for the next step only then, so the steps between readings carry nothing of this
  probe; and only when a device allocator is in use (a CPU run's reading, the RSS, is read by
  the sender thread itself).

`TRAINMETER_FAKE_CUDA_MEMORY=FILE` replays recorded answers instead of the allocator (a JSON
list of `{"stats": {memory_stats keys}, "total_b": N}`; the last repeats), for tests and bug
reports on machines without a GPU.
"""

from __future__ import annotations

import os
import resource
import time

from ...payloads import MEMORY
from ...records import ENV_FAKE_CUDA_MEMORY
from ..inputs import MIB, load_json
from ..sender import get_sender
from . import guard, steps
from .root_finder import in_dataloader_worker

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: Seconds between two reads (the agent's cadence for anything that is not a step).
INTERVAL_S = 1.0
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

#: memory_stats key -> record field
CUDA_FIELDS = (
    ("allocated_bytes.all.current", "allocated_b"),
    ("allocated_bytes.all.peak", "allocated_peak_b"),
    ("reserved_bytes.all.current", "reserved_b"),
    ("reserved_bytes.all.peak", "reserved_peak_b"),
    ("inactive_split_bytes.all.current", "inactive_split_b"),
    ("num_alloc_retries", "alloc_retries"),
    ("num_ooms", "ooms"),
)
NO_ALLOCATOR = "no caching allocator on this device"

#: The most of a `TRAINMETER_FAKE_CUDA_MEMORY` file read (a recorded answer is about 5 kB)
FAKE_MAX_BYTES = 64 * MIB

_torch: Any = None
_last_read = 0.0
_rss_peak = 0  # the highest resident size seen: ru_maxrss lags the readings (see `rss`)
_attached_pid = -1  # the process whose memory is the rank's (see `sample`)
_last_sent: dict[str, Any] | None = None
_fake: FakeAllocator | None = None


class FakeAllocator:
    """Replays recorded allocator answers: the k-th read gets the k-th, the last repeats."""

    def __init__(self, answers: list[dict[str, Any]]) -> None:
        if not answers:
            raise ValueError("no answers to replay")
        self.answers = answers
        self.reads = 0

    @classmethod
    def from_file(cls, path: str) -> FakeAllocator:
        """The answers in `path`, read with a bound (this runs inside the training process)."""
        answers = load_json(path, FAKE_MAX_BYTES, ENV_FAKE_CUDA_MEMORY)
        if not isinstance(answers, list) or not all(isinstance(a, dict) for a in answers):
            raise ValueError(f"{ENV_FAKE_CUDA_MEMORY} {path}: not a JSON list of objects")
        return cls(answers)

    def read(self) -> tuple[dict[str, Any], int | None]:
        answer = self.answers[min(self.reads, len(self.answers) - 1)]
        self.reads += 1
        total = answer.get("total_b")
        return dict(answer.get("stats") or {}), total if isinstance(total, int) else None


def rss() -> tuple[int | None, int | None]:
    """(resident bytes now, peak resident bytes) of this process.

    The kernel updates `ru_maxrss` lazily (from the memory counters it syncs now and then), so
    right after memory grew the peak it reports is below the resident size read from statm. A
    peak is never below a reading: it is the highest of the two and of every earlier reading."""
    global _rss_peak
    now = None
    try:
        with open("/proc/self/statm", "rb") as fh:
            now = int(fh.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        pass
    try:
        peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        peak = peak_kb * 1024 if peak_kb > 0 else None  # Linux reports KiB
    except (OSError, ValueError):
        peak = None
    if peak is not None:
        _rss_peak = peak = max(peak, now or 0, _rss_peak)
    return now, peak


def cuda_payload(stats: dict[str, Any], total_b: int | None, index: int | None) -> dict[str, Any]:
    """The record's fields from one `memory_stats()` answer."""
    d: dict[str, Any] = {"device": "cuda", "index": index}
    missing: dict[str, str] = {}
    for key, field in CUDA_FIELDS:
        value = stats.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            d[field] = value
        else:
            missing[field] = f"the allocator gave no {key}"
    if total_b is not None:
        d["total_b"] = total_b
    else:
        missing["total_b"] = "the card's total memory is not known"
    if missing:
        d["missing"] = missing
    return d


def _cuda_index() -> int:
    from . import device

    index = device.index()
    return index if index is not None else int(_torch.cuda.current_device())


def read() -> dict[str, Any]:
    """One reading of this process's memory, whatever the device."""
    now_b, peak_b = rss()
    if _fake is not None:
        stats, total = _fake.read()
        d = cuda_payload(stats, total, 0)
        d["fake"] = True
    elif _torch is not None and _torch.cuda.is_initialized():
        index = _cuda_index()
        stats = _torch.cuda.memory_stats(index)
        total = int(_torch.cuda.get_device_properties(index).total_memory)
        d = cuda_payload(stats, total, index)
    else:
        d = _mps_payload() or {
            "device": "cpu",
            "missing": {
                f: NO_ALLOCATOR
                for f in ("allocated_b", "reserved_b", "alloc_retries", "ooms", "total_b")
            },
        }
    if now_b is not None:
        d["rss_b"] = now_b
    if peak_b is not None:
        d["rss_peak_b"] = peak_b
    return d


def _mps_payload() -> dict[str, Any] | None:
    mps = getattr(_torch, "mps", None) if _torch is not None else None
    if mps is None or not getattr(getattr(_torch.backends, "mps", None), "is_built", bool)():
        return None
    try:
        allocated = int(mps.current_allocated_memory())
    except Exception:  # noqa: BLE001 - MPS not usable here: the CPU reading stands
        return None
    if allocated <= 0:
        return None  # nothing on the GPU: the run trains on the CPU
    d: dict[str, Any] = {"device": "mps", "allocated_b": allocated}
    try:
        d["reserved_b"] = int(mps.driver_allocated_memory())
        d["total_b"] = int(mps.recommended_max_memory())
    except Exception:  # noqa: BLE001 - an older torch: those are missing
        pass
    d["missing"] = {
        "allocated_peak_b": "MPS keeps no peak",
        "alloc_retries": "MPS keeps no retry count",
        "ooms": "MPS keeps no OOM count",
    }
    return d


def _take() -> tuple[dict[str, Any], float] | None:
    """One reading and its time when one is due, else None. Only in the process that attached
    the probe: a forked child (a DataLoader worker) carries its parent's rank, and its memory is
    not the rank's; nor is a DataLoader worker's, spawned ones included."""
    global _last_read
    now = time.monotonic()
    if now - _last_read < INTERVAL_S or os.getpid() != _attached_pid or in_dataloader_worker():
        return None
    _last_read = now
    try:
        return read(), now
    except Exception as exc:  # noqa: BLE001 - promise 1: this probe is off, the run goes on
        guard.off("memory", exc)
        steps.step_listeners[:] = [f for f in steps.step_listeners if f is not _on_step]
        return None


def _ship(d: dict[str, Any], t: float, at_step: bool) -> None:
    """Send a reading, only when it differs from the last one sent."""
    global _last_sent
    same = dict(d)
    if _last_sent is not None and same == _last_sent:
        return
    _last_sent = same
    d["at_step"] = at_step
    sender = get_sender()
    if sender is not None:
        sender.send(MEMORY.name, MEMORY.build(**d), t=t)


def sample(at_step: bool) -> None:
    """Read and send when due; send only what changed since the last record."""
    taken = _take()
    if taken is not None:
        _ship(*taken, at_step)


#: A reading taken right after a step, for the sender thread's next tick to ship.
_taken: tuple[dict[str, Any], float] | None = None


def _on_step(n: int) -> None:
    """A step listener only while a reading is due (`_drain` arms it): read, and leave. The
    comparison with the last record and the sending are the sender thread's."""
    global _taken
    try:
        steps.step_listeners.remove(_on_step)
    except ValueError:  # taken off already (the probe went off)
        pass
    taken = _take()
    if taken is not None:
        _taken = taken


def _drain() -> None:
    """The sender thread, each tick: the reading runs on this clock, never on every step. When
    one is due, the next optimizer step takes it (right after a step, the allocated bytes are
    what lives between steps) and this ships it; when no step came for two intervals, it is
    read here."""
    global _taken
    taken = _taken
    if taken is not None:
        _taken = None
        _ship(*taken, True)
    if guard.is_off("memory"):
        return
    since = time.monotonic() - _last_read
    if since >= INTERVAL_S:
        if not _device_allocator():
            sample(False)  # the process's RSS alone: the same read here as after a step
        elif _on_step not in steps.step_listeners:
            steps.step_listeners.append(_on_step)
    if since >= 2 * INTERVAL_S:
        sample(False)


def _device_allocator() -> bool:
    """Whether a reading holds a device allocator's bytes (CUDA, MPS, the fake one): only then
    is it worth taking right after a step, on the training thread. Without one (a CPU run) the
    reading is the process's RSS, the same read from the sender thread."""
    if _fake is not None:
        return True
    if _torch is None:
        return False
    return bool(_torch.cuda.is_initialized()) or _mps_payload() is not None


_on_step.probe = "memory"  # type: ignore[attr-defined]


def attach(torch: Any) -> list[str]:
    global _torch, _fake, _attached_pid, _last_read
    _torch = torch
    _attached_pid = os.getpid()
    # the first reading a second in, not at once: a spawned DataLoader worker imports torch
    # (attaching us) before it knows it is one, and its memory is not the rank's
    _last_read = time.monotonic()
    path = os.environ.get(ENV_FAKE_CUDA_MEMORY)
    if path:
        _fake = FakeAllocator.from_file(path)
    steps.step_listeners.append(_on_step)  # the first step reads; then `_drain` arms it
    sender = get_sender()
    if sender is not None:
        sender.add_drain(_drain)
    return ["memory"]
