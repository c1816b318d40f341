"""The `d` payload of each record kind, typed: the wire contract's fields in one module.

`records.py` holds the envelope (`v`, `t`, `src`, `rank`, `pid`, `kind`, `d`, and `q` on a value)
and checks it; this module says what each kind's `d` holds, for readers and type checkers.
Standard library only, like `records.py`, so the agent may import it; it imports `typing`, so a
module that runs before the child starts (or inside it) names these types under
`TYPE_CHECKING` only. Every field is optional on the wire (a reader meets old and partial
records), hence `total=False`; units are in the field's name or its comment (bytes are bytes,
times seconds, activity values fractions 0..1, never percent).
"""

from __future__ import annotations

from typing import Any, TypedDict


class ClockPair(TypedDict, total=False):
    unix: float  # read back to back with `monotonic`: a record's wall time is
    monotonic: float  # `unix + (t - monotonic)`


class JobPlace(TypedDict, total=False):
    run_id: str
    run_id_source: str
    node_rank: int
    nodes: int
    node_source: str


class RunStart(TypedDict, total=False):
    """`run.start` (src `tm`), the log's first record."""

    argv: list[str]  # redacted (`records.redact_argv`)
    tm_version: str
    name: str
    declared: dict[str, Any]  # fact key -> value, from the command line
    declared_notes: dict[str, str]  # fact key -> note (a peak's source text)
    node_uptime_s: float
    unix_time: float
    hostname: str
    python: str
    clock: ClockPair
    job: JobPlace  # docs/ranks.md


class Hello(TypedDict, total=False):
    """`hello` (src `agent`): a process says where it sits; may come again as probes attach."""

    world_size: int
    local_rank: int
    rank: int
    local_world_size: int
    node_rank: int
    nodes: int
    run_id: str
    probes: list[str]  # the probes and taps attached (the engine unions them)
    taps_armed: list[str]  # taps waiting for their tracker's import
    python: str
    executable: str
    argv0: str
    pid: int
    ppid: int
    versions: dict[str, str]


class Fact(TypedDict, total=False):
    """`fact`: one thing about the run (`FACT_KEYS` in `records.py` are the emitted ones)."""

    key: str
    value: Any
    source: str  # declared, emitted, tapped, detected, measured, assumed
    note: str
    recovered: bool  # read from a ring after the process ended


class Step(TypedDict, total=False):
    """`step`: optimizer steps since the last step record of this process."""

    k: int
    n: int  # the step index after these steps
    tokens: int  # this rank, in these k steps, padding included
    real_tokens: int  # the tokens that are not padding, when known
    micro: int  # micro-batches in them
    recovered: bool


class Metric(TypedDict, total=False):
    """`metric`: a value the loop named (through `emit` or a tracker's tap)."""

    key: str
    value: float
    via: str  # emit, wandb, tensorboard, mlflow, transformers, lightning
    step: int  # the loop's step, when known
    recovered: bool


class Phase(TypedDict, total=False):
    """`phase`: time outside compute, aggregated."""

    name: str  # data, checkpoint, eval
    s: float
    n: int


class GpuSample(TypedDict, total=False):
    """`sample.gpu` (src `tm`): one row a GPU (`gpus`), or `unavailable` without NVML."""

    gpus: list[dict[str, Any]]  # index, uuid, name, gpu_util, memory_used_b, power_w, energy_j, ...
    selected_by: str  # flag, env, process, all
    versions: dict[str, str]
    gpm_unavailable: str
    unavailable: str


class HostSample(TypedDict, total=False):
    """`sample.host` (src `tm`): the child's process tree."""

    procs: int
    pids: list[int]
    cpu_s: float  # cumulative CPU seconds of the live tree
    rss_kb: int


class NodeSample(TypedDict, total=False):
    """`sample.node` (src `tm`): the machine."""

    cpu: dict[str, float]  # user, system, iowait, steal, idle: fractions
    cores: int
    load: list[float]  # 1, 5, 15 minutes
    memory: dict[str, int]
    disk: dict[str, Any]
    disk_io: dict[str, int]  # cumulative
    net: dict[str, int]  # cumulative
    limits: dict[str, Any]  # cgroup limits below the host's


class Alert(TypedDict, total=False):
    """`alert` (src `tm`): a new alert of the engine's, logged; never fed back into a number."""

    kind: str
    message: str


class RunEnd(TypedDict, total=False):
    """`run.end` (src `tm`), the log's last record."""

    exit_status: int
    signal: int | None  # the signal that killed the command, else null
    elapsed_s: float
    signal_from: str  # "outside": the signal was sent to tm and passed on (a preemption)
    oom_kills: int  # the OOM killer's kills in the run's cgroup (or host) during the run
    oom_source: str  # where that count was read


class Memory(TypedDict, total=False):
    """`memory` (src `agent`): one rank's memory, read from the allocator's host-side counters
    (CUDA, MPS) or the process (RSS on a CPU), about once a second and only when it changed."""

    device: str  # "cuda", "mps" or "cpu"
    index: int | None  # the CUDA device the rank trains on
    allocated_b: int
    allocated_peak_b: int
    reserved_b: int
    reserved_peak_b: int
    inactive_split_b: int  # cached but not allocated: the fragmentation the allocator reports
    alloc_retries: int
    ooms: int
    total_b: int  # the card's total memory
    rss_b: int
    rss_peak_b: int
    missing: dict[str, str]  # field -> why this device cannot say it
    at_step: bool  # read right after an optimizer step
    fake: bool  # replayed from TRAINMETER_FAKE_CUDA_MEMORY


class Crash(TypedDict, total=False):
    """`crash` (src `agent`): the uncaught exception a process is about to die of."""

    type: str  # the exception's qualified type name
    message: str  # its text, bounded
    thread: str  # the thread it was raised in
    collective: str  # the innermost torch.distributed collective on the traceback
    where: str  # the innermost frame of the user's code, 'file:line in function'


#: Each kind's payload type (the keys are `records.KINDS`).
PAYLOADS: dict[str, type] = {
    "run.start": RunStart,
    "hello": Hello,
    "fact": Fact,
    "step": Step,
    "metric": Metric,
    "phase": Phase,
    "sample.gpu": GpuSample,
    "sample.host": HostSample,
    "sample.node": NodeSample,
    "alert": Alert,
    "memory": Memory,
    "crash": Crash,
    "run.end": RunEnd,
}
