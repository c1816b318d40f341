"""What to try, in words: advice only where a measured number supports it, each with its number.

Each rule is given, by name, the numbers the other parts found (the time split, the GPU
counters' ladder and rows, the alerts, the straggler named, padding, memory) and fires only
past a threshold (below), so a run whose numbers do not point anywhere gets no advice at all. Every item carries the
numbers it rests on (`evidence`: name, value, unit, source): no advice without its reason.

    data_wait        data wait / (compute + data wait)           >= DATA_SHARE
                     and the data wait itself                    >= MIN_WORTH_S
    non_tensor_work  SM active >= SM_BUSY and tensor / SM active <  TENSOR_SHARE     (GPM)
    clocks_held      a GPU's latest throttle reasons name power or heat
    slow_rank        a rank (or node) named by the straggler rule (engine/stragglers.py)
    padding          padding share of the tokens                  >= PADDING_SHARE
    eval, checkpoint that part of the wall time                   >= PHASE_SHARE
                     and that part's seconds                     >= MIN_WORTH_S
    fragmentation    memory is short (a memory alert) and (reserved - allocated) / reserved
                                                                  >= FRAGMENTED_SHARE
    activations      memory is short and (peak allocated - allocated between steps) / peak
                                                                  >= TRANSIENT_SHARE
"""

from __future__ import annotations

from typing import Any

from .formulas import num

DATA_SHARE = 0.10
FEW_WORKERS = 2
SM_BUSY = 0.60
TENSOR_SHARE = 0.50
PADDING_SHARE = 0.10
PHASE_SHARE = 0.10
FRAGMENTED_SHARE = 0.20
TRANSIENT_SHARE = 0.50
# A share alone is not worth a change to the training code: 11% of a 0.3 s run is 0.03 s. A time
# rule fires only once the time it points at is at least this long, so short runs (and the
# first seconds of a live one) get no advice made of noise.
MIN_WORTH_S = 1.0


def _ev(name: str, value: Any, unit: str, source: str) -> dict[str, Any]:
    return {"name": name, "value": value, "unit": unit, "source": source}


def _item(kind: str, message: str, evidence: list[dict[str, Any]]) -> dict[str, Any]:
    return {"kind": kind, "message": message, "evidence": evidence}


def _parts(time: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    return {p.get("name"): p for p in (time or {}).get("parts") or []}


def data_wait(time: dict[str, Any] | None, workers: float | None) -> dict[str, Any] | None:
    """`workers`: the DataLoader's worker count (the `dataloader_workers` fact), or None."""
    parts = _parts(time)
    data, compute = parts.get("data") or {}, parts.get("compute") or {}
    wait, busy = num(data.get("s")), num(compute.get("s"))
    if not data.get("measured") or wait is None or busy is None or wait + busy <= 0:
        return None
    share = wait / (wait + busy)
    if share < DATA_SHARE or wait < MIN_WORTH_S:
        return None
    evidence = [
        _ev("data_wait_share", share, "fraction", "data wait / (compute + data wait), time split"),
        _ev("data_wait_s", wait, "s", "time split (DataLoader __next__)"),
    ]
    head = f"Data wait is {share:.0%} of the training time ({wait:.1f} s)"
    if workers is None:
        message = (
            head + ": the DataLoader's worker count is not known; give it more workers "
            "(num_workers), pin_memory=True and prefetching, or preprocess the data ahead"
        )
    else:
        evidence.append(_ev("dataloader_workers", int(workers), "workers", "detected"))
        if workers <= FEW_WORKERS:
            message = head + (
                f" with {int(workers)} DataLoader worker{'s' if workers != 1 else ''}: "
                "raise num_workers (one or more per CPU core you can spare), with "
                "pin_memory=True and persistent_workers=True"
            )
        else:
            message = head + (
                f" although the DataLoader has {int(workers)} workers: the storage or the "
                "per-sample preprocessing is the bottleneck; preprocess ahead or cache"
            )
    return _item("data_wait", message, evidence)


def non_tensor_work(ladder: dict[str, Any] | None) -> dict[str, Any] | None:
    mean = (ladder or {}).get("mean") or {}
    sm, tensor = num(mean.get("sm_active")), num(mean.get("tensor_active"))
    if sm is None or tensor is None or sm < SM_BUSY:
        return None
    share = tensor / sm
    if share >= TENSOR_SHARE:
        return None
    return _item(
        "non_tensor_work",
        f"The SMs are busy ({sm:.0%} SM active) but only {share:.0%} of that is tensor-core "
        "work: time goes to kernels outside matmuls (elementwise, normalization, optimizer); "
        "fuse them (torch.compile, fused optimizers, fused attention) or use bf16 matmuls",
        [_ev("sm_active", sm, "fraction", "GPM, mean over GPUs"),
         _ev("tensor_share", share, "fraction", "tensor active / SM active, GPM")],
    )


def clocks_held(
    alerts: list[dict[str, Any]] | None, gpus: dict[str, dict[str, Any]] | None
) -> list[dict[str, Any]]:
    out = []
    gpus = gpus or {}
    for alert in alerts or []:
        if alert.get("kind") != "gpu_throttle":
            continue
        gpu = str(alert.get("gpu"))
        row = gpus.get(gpu) or {}
        clock, top = num(row.get("sm_clock_mhz")), num(row.get("max_sm_clock_mhz"))
        reasons = ", ".join(alert.get("reasons") or [])
        evidence = [_ev(f"throttle_reasons[{gpu}]", reasons, "", "NVML throttle reasons")]
        at = ""
        if clock is not None and top:
            at = f" at {clock:.0f} of {top:.0f} MHz ({clock / top:.0%})"
            evidence.append(_ev(f"sm_clock_mhz[{gpu}]", clock, "MHz", "NVML, latest sample"))
            evidence.append(_ev(f"max_sm_clock_mhz[{gpu}]", top, "MHz", "NVML"))
        heat = "thermal" in reasons.lower()
        fix = (
            "check cooling and airflow"
            if heat
            else "check the power limit (nvidia-smi -q -d POWER)"
        )
        out.append(
            _item(
                "clocks_held",
                f"GPU {gpu} runs with its clocks held down by {reasons}{at}: {fix}",
                evidence,
            )
        )
    return out


def slow_rank(straggler: dict[str, Any] | None) -> dict[str, Any] | None:
    """The straggler the engine named (engine/stragglers.py): which rank, by how much."""
    named = straggler or {}
    extra, share = num(named.get("extra_s")), num(named.get("extra_share"))
    kind = named.get("kind")
    if extra is None or share is None or kind not in ("rank", "node"):
        return None
    who = named.get(kind)
    others = named.get("others")
    subject = f"Node {who}" if kind == "node" else f"Rank {who}"
    look = (
        "look at that node: its GPUs' clocks and temperatures, its network link, its host load"
        if kind == "node"
        else "look at its data shard, its GPU's clocks and its host"
    )
    return _item(
        "slow_rank",
        f"{subject} computes {extra * 1000:.0f} ms longer a step than the other ranks since "
        f"step {named.get('since_step')}; "
        f"{'the other rank waits' if others == 1 else f'the other {others} ranks wait'} for it "
        "each step "
        f"({share:.0%} of the job's step time): {look}",
        [_ev("extra_s", extra, "s", "compute per step over the median of the other ranks'"),
         _ev("extra_share", share, "fraction", "extra_s / step time"),
         _ev("step_time_s", named.get("step_time_s"), "s", "median over ranks, same blocks")],
    )


def padding_share(padding: dict[str, Any] | None) -> dict[str, Any] | None:
    share = num((padding or {}).get("share"))
    if share is None or share < PADDING_SHARE:
        return None
    return _item(
        "padding",
        f"{share:.0%} of the tokens in the batches are padding: pack sequences or bucket "
        "batches by length",
        [_ev("padding_share", share, "fraction", "1 - real tokens / all tokens (detected)")],
    )


def phases(time: dict[str, Any] | None) -> list[dict[str, Any]]:
    out = []
    elapsed = num((time or {}).get("elapsed_s"))
    if not elapsed:
        return out
    parts = _parts(time)
    for name, fix in (
        ("eval", "evaluate less often or on a smaller set"),
        ("checkpoint", "checkpoint less often, or asynchronously (torch.distributed.checkpoint "
         "async_save)"),
    ):
        part = parts.get(name) or {}
        seconds = num(part.get("s"))
        if not part.get("measured") or seconds is None:
            continue
        share = seconds / elapsed
        if share < PHASE_SHARE or seconds < MIN_WORTH_S:
            continue
        n = part.get("n")
        times = f" over {n} time{'s' if n != 1 else ''}" if isinstance(n, int) else ""
        out.append(
            _item(
                name,
                f"{part.get('label', name)} took {share:.0%} of the wall time "
                f"({seconds:.1f} s{times}): {fix}",
                [
                    _ev(f"{name}_share", share, "fraction", f"{name} / elapsed, time split"),
                    _ev(f"{name}_s", seconds, "s", "time split"),
                ],
            )
        )
    return out


def advise(
    *,
    time: dict[str, Any] | None = None,
    workers: float | None = None,
    ladder: dict[str, Any] | None = None,
    straggler: dict[str, Any] | None = None,
    padding: dict[str, Any] | None = None,
    alerts: list[dict[str, Any]] | None = None,
    gpus: dict[str, dict[str, Any]] | None = None,
    memory: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Every piece of advice the numbers support, most time-costly kinds first."""
    found = (data_wait(time, workers), non_tensor_work(ladder), slow_rank(straggler),
             padding_share(padding))
    out: list[dict[str, Any]] = [item for item in found if item is not None]
    out.extend(clocks_held(alerts, gpus))
    out.extend(phases(time))
    out.extend(memory_short(alerts, memory))
    return out


def memory_short(
    alerts: list[dict[str, Any]] | None, memory: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """Only for a rank a memory alert names: what is taking the room, measured."""
    short = {
        str(a.get("rank")) for a in alerts or []
        if a.get("kind") in ("memory_retries", "memory_near_full")
    }
    rows = (memory or {}).get("ranks") or {}
    out: list[dict[str, Any]] = []
    for rank in sorted(short):
        row = rows.get(rank) or {}
        frag, transient = num(row.get("fragmentation")), num(row.get("transient_share"))
        if frag is not None and frag >= FRAGMENTED_SHARE:
            out.append(_item(
                "fragmentation",
                f"Rank {rank}: {frag:.0%} of the reserved memory is cached but not allocated "
                f"({row['fragmentation_b'] / 2**30:.2f} GiB): the cache is fragmented; set "
                "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
                [
                    _ev("fragmentation", frag, "fraction", "(reserved - allocated) / reserved, "
                        "torch.cuda.memory_stats"),
                    _ev("reserved_b", row.get("reserved_b"), "B", "torch.cuda.memory_stats"),
                    _ev("allocated_b", row.get("allocated_b"), "B", "torch.cuda.memory_stats"),
                ],
            ))
        if transient is not None and transient >= TRANSIENT_SHARE:
            out.append(_item(
                "activations",
                f"Rank {rank}: {transient:.0%} of the peak allocated memory is freed again by the "
                "end of each step (activations, mostly): activation checkpointing or a smaller "
                "micro-batch makes room",
                [
                    _ev("transient_share", transient, "fraction",
                        "(peak allocated - allocated after a step) / peak allocated"),
                    _ev("allocated_peak_b", row.get("allocated_peak_b"), "B",
                        "torch.cuda.memory_stats"),
                    _ev("between_steps_b", row.get("between_steps_b"), "B",
                        "allocated after an optimizer step, torch.cuda.memory_stats"),
                ],
            ))
    return out
