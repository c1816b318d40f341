"""Every record kind in one table: its payload's fields, who writes it, where it is made and read.

`records.py` holds the envelope (`v`, `t`, `src`, `rank`, `pid`, `kind`, `d`, and `q` on a value)
and checks it; this module holds each kind's `d`. It is the one place a kind is named: the
agent, `tm` and the engine build each payload with its kind's `build` (a field the kind does
not have is a `TypeError` in the producer's own tests, not a number nobody reads) and refer to
a kind by its entry here (`payloads.STEP.name`), never by a string of their own. `KINDS` is the
wire schema's list of kinds (`records.KINDS` is its keys); tm's typed decoding of the common
kinds (`runlog/typed.py`) is made from `fields`; `tests/wire/test_payloads.py` checks that every
kind round-trips through its type and that `made_in` and `read_in` name exactly the modules
that build and read it.

Standard library only and no `typing` at run time: the agent imports this module inside the
training process, where every millisecond of start-up is the user's. Every field is optional on
the wire (a reader meets old and partial records). Units are in a field's name or its note:
bytes are bytes, times seconds, activity values fractions 0..1, never percent.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs milliseconds at start-up in every Python the run starts
if TYPE_CHECKING:
    from typing import Any

NUMBER = (int, float)
NONE = type(None)


class Kind:
    """One record kind: `name` (the envelope's `kind`), `writers` (the `src` values of its
    records), `fields` ({name: (accepted types, what it holds)}; a field whose types include
    None is written as null when unknown, any other is left out), and the modules, relative to
    the package, that make it (`made_in`) and read it (`read_in`). `extensible`: a payload may carry
    fields beyond these (an alert's measured inputs)."""

    __slots__ = ("name", "writers", "fields", "made_in", "read_in", "extensible", "_nullable")

    def __init__(
        self,
        name: str,
        writers: tuple[str, ...],
        fields: dict[str, tuple[tuple[type, ...], str]],
        made_in: tuple[str, ...],
        read_in: tuple[str, ...],
        extensible: bool = False,
    ) -> None:
        self.name = name
        self.writers = writers
        self.fields = fields
        self.made_in = made_in
        self.read_in = read_in
        self.extensible = extensible
        self._nullable = frozenset(f for f, (types, _) in fields.items() if NONE in types)

    def build(self, **values: Any) -> dict[str, Any]:
        """The payload `d` of one record of this kind, in the order given; a value of None is
        left out unless its field is written as null when unknown."""
        fields, nullable = self.fields, self._nullable
        d = {}
        for name, value in values.items():
            if name not in fields and not self.extensible:
                raise TypeError(f"a {self.name} record has no field {name!r}")
            if value is not None or name in nullable:
                d[name] = value
        return d

    @property
    def only_tm(self) -> bool:
        """Written by `tm` alone: from a training process's socket, such a record is forged."""
        return self.writers == ("tm",)

    def __repr__(self) -> str:
        return f"payloads.{self.name}"


def _f(types: Any, note: str = "") -> tuple[tuple[type, ...], str]:
    return (types if isinstance(types, tuple) else (types,)), note


RUN_START = Kind(
    "run.start",
    ("tm",),
    {
        "argv": _f(list, "the command, redacted (`records.redact_argv`)"),
        "command": _f(list, "the command as given to tm, redacted"),
        "tm_version": _f(str),
        "name": _f(str),
        "declared": _f(dict, "fact key -> value, from the command line"),
        "declared_notes": _f(dict, "fact key -> note (a peak's source text)"),
        "node_uptime_s": _f(NUMBER),
        "unix_time": _f(NUMBER),
        "hostname": _f(str),
        "python": _f(str),
        "executable": _f(str),
        "clock": _f(dict, "{unix, monotonic} read back to back: wall time = unix + (t - monotonic)"),
        "job": _f(dict, "{run_id, run_id_source, node_rank, nodes, node_source} (docs/ranks.md)"),
        "agent": _f(bool, "the agent was put in the training processes (not --no-agent)"),
        "tap": _f(bool, "the taps were armed (not --no-tap)"),
        "attached_pid": _f(int, "tm attach: the process watched from outside"),
    },
    made_in=("supervisor/session.py", "cli/attach.py"),
    read_in=("engine/snapshot.py", "runlog/decode.py", "runlog/replay_many.py", "runlog/runs.py"),
    extensible=True,  # `about()` describes the run; what it holds grows with tm
)

HELLO = Kind(
    "hello",
    ("agent",),
    {
        "world_size": _f(int),
        "local_rank": _f((int, NONE), "LOCAL_RANK (or SLURM_LOCALID)"),
        "rank": _f((int, NONE)),
        "local_world_size": _f((int, NONE)),
        "node_rank": _f((int, NONE)),
        "nodes": _f((int, NONE)),
        "run_id": _f((str, NONE), "the job's id, shared by its nodes (docs/ranks.md)"),
        "probes": _f(list, "the probes and taps attached (the engine unions them)"),
        "taps_armed": _f(list, "taps waiting for their tracker's import"),
        "python": _f(str),
        "executable": _f(str),
        "argv0": _f((str, NONE)),
        "pid": _f(int),
        "ppid": _f(int),
        "versions": _f(dict, "{torch: ..., ...}"),
    },
    made_in=("agent/boot.py",),
    read_in=("engine/snapshot.py", "runlog/plausible.py", "runlog/recorder.py"),
)

FACT = Kind(
    "fact",
    ("agent", "emit", "tm"),
    {
        "key": _f(str, "tokens_per_step, n_params, ... (docs/architecture.md lists them)"),
        "value": _f(object),
        "source": _f(str, "declared, emitted, tapped, detected, measured, assumed"),
        "note": _f(str),
        "reasons": _f(dict, "ingest_dropped: lines refused, by reason"),
        "recovered": _f(bool, "read from a ring after the process ended"),
    },
    made_in=(
        "agent/probes/architecture.py", "agent/probes/device.py", "agent/probes/first_iteration.py",
        "agent/probes/flops.py",
        "agent/probes/model.py", "agent/probes/phases.py", "agent/probes/precision.py",
        "agent/probes/step_signal.py", "agent/sender.py", "records.py", "supervisor/ring.py",
        "supervisor/live.py", "supervisor/ending.py", "supervisor/observe_only.py",
        "supervisor/session.py", "cli/attach.py",
    ),
    read_in=(
        "engine/snapshot.py", "runlog/decode.py", "runlog/plausible.py", "runlog/recorder.py",
        "supervisor/ring.py",
    ),
)

STEP = Kind(
    "step",
    ("agent",),
    {
        "k": _f(int, "optimizer steps since the last step record of this process"),
        "n": _f(int, "the step index after these steps"),
        "tokens": _f(int, "this rank, in these k steps, padding included"),
        "real_tokens": _f(int, "the tokens that are not padding, when known"),
        "micro": _f(int, "micro-batches in them"),
        "recovered": _f(bool, "read from a ring after the process ended"),
    },
    made_in=("agent/probes/step_totals.py", "supervisor/ring.py"),
    read_in=(
        "engine/snapshot.py", "runlog/decode.py", "runlog/plausible.py", "runlog/replay.py",
        "runlog/typed.py", "supervisor/ring.py",
    ),
)

METRIC = Kind(
    "metric",
    ("emit", "agent"),
    {
        "key": _f(str, "as the loop named it"),
        "value": _f(NUMBER),
        "via": _f(str, "emit, wandb, tensorboard, mlflow, transformers, lightning"),
        "step": _f(int, "the loop's step, when known"),
        "recovered": _f(bool, "read from a ring after the process ended"),
    },
    made_in=("records.py",),
    read_in=(
        "engine/snapshot.py", "runlog/decode.py", "runlog/plausible.py", "runlog/typed.py",
        "supervisor/ring.py",
    ),
)

PHASE = Kind(
    "phase",
    ("agent",),
    {
        "name": _f(str, "data, checkpoint, eval"),
        "s": _f(NUMBER, "seconds, aggregated since the last phase record of this name"),
        "n": _f(int, "occurrences in them"),
    },
    made_in=("agent/probes/phases.py",),
    read_in=("engine/snapshot.py", "runlog/decode.py", "runlog/plausible.py", "runlog/typed.py"),
)

COMM = Kind(
    "comm",
    ("agent",),
    {
        "k": _f(int, "steps covered: those since this process's last comm record"),
        "n": _f(int, "the step index after them (the record's t is that step's time)"),
        "s": _f(NUMBER, "seconds blocked in collectives waiting for the other ranks (exposed: "
                "not overlapped with compute)"),
        "spans_s": _f(NUMBER, "the part of s inside eval or checkpoint spans"),
        "calls": _f(int, "waits timed"),
        "timed": _f(str, "host (the host blocked: CPU, gloo) or device (CUDA events on the "
                    "compute stream)"),
        "recovered": _f(bool, "read from a ring after the process ended"),
    },
    made_in=("agent/probes/collectives.py",),
    read_in=("engine/snapshot.py", "runlog/decode.py", "runlog/plausible.py"),
)

SAMPLE_GPU = Kind(
    "sample.gpu",
    ("tm",),
    {
        "gpus": _f(list, "a row a GPU: index, uuid, name, gpu_util, memory_used_b, power_w, "
                   "energy_j, ..., GPM's sm_active, tensor_active, dram_active, missing"),
        "selected_by": _f(str, "flag, env, process, all"),
        "selected": _f(list, "the indices of the GPUs read"),
        "selection_note": _f(str, "why these GPUs"),
        "versions": _f(dict, "{driver, nvml, cuda}"),
        "gpm_unavailable": _f(str),
        "unavailable": _f(str, "why there is no GPU reading at all"),
    },
    made_in=("sources/gpu/sampler.py",),
    read_in=("cli/attach.py", "engine/snapshot.py", "runlog/decode.py", "runlog/replay.py"),
)

SAMPLE_HOST = Kind(
    "sample.host",
    ("tm",),
    {
        "procs": _f(int),
        "pids": _f(list),
        "cpu_s": _f(NUMBER, "cumulative CPU seconds of the live tree"),
        "rss_kb": _f(int),
        "missing": _f(dict, "field -> why it could not be read"),
    },
    made_in=("sources/host.py",),
    read_in=("cli/attach.py", "engine/snapshot.py", "runlog/decode.py"),
)

SAMPLE_NODE = Kind(
    "sample.node",
    ("tm",),
    {
        "cpu": _f(dict, "user, system, iowait, steal, idle: fractions"),
        "cpu_per_core": _f(list, "each core's busy share"),
        "cores": _f(int),
        "load": _f(list, "1, 5, 15 minutes"),
        "memory": _f(dict),
        "disk": _f(dict),
        "disk_io": _f(dict, "cumulative"),
        "net": _f(dict, "cumulative"),
        "limits": _f(dict, "cgroup limits below the host's"),
        "missing": _f(dict, "part -> why it could not be read"),
    },
    made_in=("sources/node.py",),
    read_in=("engine/snapshot.py", "runlog/decode.py"),
)

ALERT = Kind(
    "alert",
    ("tm",),
    {
        "kind": _f(str),
        "message": _f(str),
    },
    made_in=("supervisor/live.py",),
    read_in=(),  # logged for people: the engine computes alerts, never reads them back
    extensible=True,  # plus what it was measured from
)

MEMORY = Kind(
    "memory",
    ("agent",),
    {
        "device": _f(str, "cuda, mps or cpu"),
        "index": _f((int, NONE), "the CUDA device the rank trains on"),
        "allocated_b": _f(int),
        "allocated_peak_b": _f(int),
        "reserved_b": _f(int),
        "reserved_peak_b": _f(int),
        "inactive_split_b": _f(int, "cached but not allocated: the allocator's fragmentation"),
        "alloc_retries": _f(int),
        "ooms": _f(int),
        "total_b": _f(int, "the card's total memory"),
        "rss_b": _f(int),
        "rss_peak_b": _f(int),
        "missing": _f(dict, "field -> why this device cannot say it"),
        "at_step": _f(bool, "read right after an optimizer step"),
        "fake": _f(bool, "replayed from TRAINMETER_FAKE_CUDA_MEMORY"),
    },
    made_in=("agent/probes/memory.py",),
    read_in=("engine/snapshot.py", "runlog/plausible.py"),
)

CRASH = Kind(
    "crash",
    ("agent", "tm"),
    {
        "type": _f(str, "the exception's qualified type name"),
        "message": _f(str, "its text, bounded"),
        "thread": _f(str),
        "collective": _f(str, "the innermost torch.distributed collective on the traceback"),
        "where": _f(str, "the innermost frame of the user's code, 'file:line in function'"),
        "native": _f(bool, "tm: a native crash, from faulthandler's file"),
        "pid": _f((int, NONE)),
        "rank": _f((int, NONE)),
        "stack_file": _f(str, "in the run directory"),
        "threads": _f(int),
    },
    made_in=("agent/crash.py", "supervisor/ending.py"),
    read_in=("engine/snapshot.py", "runlog/decode.py", "runlog/plausible.py"),
)

RUN_END = Kind(
    "run.end",
    ("tm",),
    {
        "exit_status": _f((int, NONE)),
        "signal": _f((int, NONE), "the signal that killed the command, else null"),
        "elapsed_s": _f(NUMBER),
        "signal_from": _f(str, "outside: the signal was sent to tm and passed on"),
        "oom_kills": _f(int, "the OOM killer's kills in the run's cgroup (or host)"),
        "oom_source": _f(str, "where that count was read"),
        "attach_end": _f(str, "tm attach: detached or exited"),
        "note": _f(str),
    },
    made_in=("supervisor/ending.py", "cli/attach.py"),
    read_in=("cli/top.py", "engine/snapshot.py", "runlog/decode.py"),
)

#: Every kind, by name: the wire schema's kinds.
KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        RUN_START, HELLO, FACT, STEP, METRIC, PHASE, COMM, SAMPLE_GPU, SAMPLE_HOST, SAMPLE_NODE,
        ALERT, MEMORY, CRASH, RUN_END,
    )
}

#: Keys that `emit()` takes as facts about the run rather than as series.
EMITTED_FACT_KEYS = frozenset({"tokens_per_step"})


def value_is_fact(via: str, key: str) -> bool:
    """The one rule for what a named value becomes: `emit` of a key in `EMITTED_FACT_KEYS` is
    a `fact` about the run (no step); anything else, and any value a tap saw, a `metric`."""
    return via == "emit" and key in EMITTED_FACT_KEYS
