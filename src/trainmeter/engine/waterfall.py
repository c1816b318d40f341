"""The MFU waterfall: from 100% of the dense peak down to the MFU the snapshot shows, one
measured factor a loss.

Why two scopes. The MFU the snapshot shows is a rate over the training window (model FLOPs per
token x tokens/s, Σ tokens / Σ time over the rate window of rank 0's step reports, over GPUs x
peak): the time before the first step and after the last one is not in it. So the chain is cut
in two:

    whole run:  window / elapsed                          startup and compile, after the last step
    in steps:   (compute + comm) / window                 data wait, eval, checkpoints between steps
                compute / (compute + comm)                waiting for other ranks (exposed comm)
                (SM active or GPU-Util) / (compute/window) GPU idle within steps
                tensor active / SM active                 SM work that is not tensor work
                OFU / tensor active                       SM clock below the tensor clock
                MFU / OFU                                 executed vs model FLOPs

The in-steps factors multiply to the MFU exactly (they telescope: (compute+comm)/window x
compute/(compute+comm) x busy/(compute/window) x tensor/busy x OFU/tensor x MFU/OFU; without
ranks to wait for, comm is 0 and its factor is left out); with the whole-run factor in front, the chain
ends at window/elapsed x MFU, the model FLOPs of the whole run as a share of the peak at the
steady rate. A counter that is absent (no GPM, no tensor clock, no GPU sample) leaves its factor
absent with the reason and its loss is carried by the last factor, which then says what it
includes: never a made-up share. A factor above 1 is kept as it is, with the reason it can be.
See docs/waterfall.md.
"""

from __future__ import annotations

import math
from typing import Any

from .formulas import num
from .section import Section

_ABOVE_ONE = {
    "gpu_idle": (
        "the GPU was busier over the counters' sample than the share of the window spent in "
        "steps: it kept working through the data wait, eval or checkpoint (work queued ahead of "
        "the host), or the sample caught no wait"
    ),
    "tensor_share": (
        "tensor active above SM active: the two GPM counters are read over slightly different "
        "windows, so a GPU that is nearly all tensor work can read just over 1"
    ),
    "model_vs_executed": (
        "the convention counts more FLOPs than the tensor cores were seen executing (attention "
        "or embedding FLOPs a fused kernel skips, or the counters' sample window caught a "
        "quieter moment than the MFU's rate): the convention, not the hardware, is the ceiling"
    ),
}


def _factor(
    name: str, label: str, value: float, formula: str, scope: str, inputs: list[dict[str, Any]]
) -> dict[str, Any]:
    entry: dict[str, Any] = dict(
        name=name, label=label, value=value, loss=1.0 - value, formula=formula, scope=scope,
        inputs=inputs,
    )
    entry["source"] = _SOURCE.get(name, "measured")
    if value > 1.0 and name in _ABOVE_ONE:
        entry["above_one"] = _ABOVE_ONE[name]
    return entry


#: Each factor's provenance (its inputs carry the source of every number in it).
_SOURCE = {
    "time_outside_window": "measured: the time split (step records, phase probes, run start/end)",
    "time_outside_steps": "measured: the time split",
    "comm_wait": "measured: the time split (the clock rank's waits in collectives)",
    "gpu_idle": "measured: NVML (GPM SM active, else GPU-Util) and the time split",
    "tensor_share": "measured: GPM tensor active and SM active",
    "clocks": "measured: NVML SM clock; the tensor clock from the card's spec",
    "model_vs_executed": "derived: the MFU over the product of the measured factors before it",
}


def _inp(name: str, value: Any, unit: str, source: str) -> dict[str, Any]:
    return {"name": name, "value": value, "unit": unit, "source": source}


def _target(
    mfu: dict[str, Any] | None,
    mfu_reason: str | None,
    counted: dict[str, Any] | None,
    samples: dict[str, Any] | None,
) -> tuple[float, str, str] | str:
    """(MFU, convention, where it comes from), or why there is none."""
    mfu = mfu or {}
    value = num(mfu.get("value"))
    if value is not None and value > 0:
        return value, str(mfu.get("convention")), "snapshot mfu"
    value = num((counted or {}).get("utilization"))
    if value is not None and value > 0:
        return value, "counted", "snapshot counted.utilization"
    value = num(((samples or {}).get("mfu") or {}).get("value"))
    if value is not None and value > 0:
        return value, "counted", "snapshot samples.mfu"
    if mfu.get("range"):
        return "MFU is a range (no convention chosen): declare --convention to get a waterfall"
    return "needs MFU: " + (mfu_reason if mfu_reason is not None else "not measured")


#: where the chain ends -> (snapshot key, words a heading uses)
_ENDS = {
    "snapshot mfu": ("mfu", "MFU"),
    "snapshot counted.utilization": ("counted.utilization", "counted utilization"),
    "snapshot samples.mfu": ("samples.mfu", "MFU (counted, from samples)"),
}


def _ends_at(
    out: dict[str, Any], mfu: dict[str, Any] | None, mfu_reason: str | None, mfu_from: str
) -> None:
    """Say which number the chain ends at, so no view calls the counted utilization an MFU:
    `ends_at` (the snapshot key), `ends_at_label`, and, when it is not the MFU, `mfu_absent`."""
    key, label = _ENDS.get(mfu_from, ("mfu", "MFU"))
    out["ends_at"] = key
    out["ends_at_label"] = f"MFU ({out['convention']})" if key == "mfu" else label
    if key == "counted.utilization":
        out["mfu_absent"] = (
            "no FLOPs convention chosen, so the MFU is a range: declare --convention"
            if (mfu or {}).get("range")
            else mfu_reason if mfu_reason is not None else "not measured"
        )


def _mean(ladder: dict[str, Any] | None) -> dict[str, Any]:
    return (ladder or {}).get("mean") or {}


def _busy(
    ladder: dict[str, Any] | None, ladder_reason: str | None, in_steps: float | None
) -> tuple[dict[str, Any] | None, str]:
    """GPU idle within steps: SM active where GPM reads it, else GPU-Util, labelled which;
    divided by the share of the training window spent in steps, so that the data wait, eval and
    checkpoints between steps (a factor of their own) are not taken out twice."""
    mean = _mean(ladder)
    for key, basis, source in (
        ("sm_active", "SM active, GPM", "GPM, mean over the GPUs MFU divides by, latest sample"),
        ("gpu_util", "GPU-Util, no GPM", "NVML utilization, mean over the GPUs MFU divides by, latest sample"),
    ):
        value = num(mean.get(key))
        if value is None:
            continue
        name = "SM active" if key == "sm_active" else "GPU-Util"
        inputs = [_inp(key, value, "fraction", source)]
        formula = name
        if in_steps:
            inputs.append(_inp("time_in_steps", in_steps, "fraction", "compute / window"))
            formula = f"{name} / (compute / window)"
            value = value / in_steps
        label = f"GPU idle within steps (1 - {basis})"
        return _factor("gpu_idle", label, value, formula, "steps", inputs), key
    return None, ladder_reason if ladder_reason is not None else "no GPU counters"


def _tensor(ladder: dict[str, Any] | None, basis: str) -> tuple[dict[str, Any] | None, str]:
    mean = _mean(ladder)
    tensor, sm = num(mean.get("tensor_active")), num(mean.get("sm_active"))
    if tensor is None or basis != "sm_active":
        return None, "no tensor-activity counter (GPM needs a Hopper or newer data-center GPU)"
    if not sm:
        return None, "SM active read 0 in the latest sample: no share to take"
    return _factor(
        "tensor_share", "SM work that is not tensor work", tensor / sm,
        "tensor active / SM active", "steps",
        [_inp("tensor_active", tensor, "fraction", "GPM, mean over the GPUs MFU divides by, latest sample"),
         _inp("sm_active", sm, "fraction", "GPM, mean over the GPUs MFU divides by, latest sample")],
    ), ""


def _clocks(
    ladder: dict[str, Any] | None,
    ofu: dict[str, Any] | None,
    gpus: dict[str, dict[str, Any]] | None,
    tensor_clocks: dict[str, float | None],
    basis: str,
) -> tuple[dict[str, Any] | None, str]:
    """Clocks below the tensor clock. With GPM: OFU / tensor active (each GPU's tensor activity
    weighted by its min(SM clock, tensor clock) / tensor clock); without: the same ratio
    weighted by each GPU's GPU-Util. Both over the GPUs MFU divides by (`ladder.covers`)."""
    mean = _mean(ladder)
    if basis == "sm_active":
        tensor, ofu_mean = num(mean.get("tensor_active")), num(mean.get("ofu"))
        if not (ofu or {}).get("comparable_with_mfu", False) or ofu_mean is None:
            return None, "the card's spec states no tensor clock for its dense peak"
        if not tensor:
            return None, "tensor active read 0 in the latest sample: no clock to weigh"
        return _factor(
            "clocks", "Clocks below the tensor clock", ofu_mean / tensor, "OFU / tensor active",
            "steps",
            [_inp("ofu", ofu_mean, "fraction", "tensor active x min(SM clock, tensor clock) / "
                  "tensor clock, mean over the GPUs MFU divides by, latest sample"),
             _inp("tensor_active", tensor, "fraction", "GPM, mean over the GPUs MFU divides by, latest sample")],
        ), ""
    rows = _covered_rows(gpus, ladder)
    num_sum = den = 0.0
    clocks: list[dict[str, Any]] = []
    for label, row in rows.items():
        util, clock = num(row.get("gpu_util")), num(row.get("sm_clock_mhz"))
        tclk = tensor_clocks.get(label)
        if util is None or clock is None:
            continue
        if not tclk:
            return None, f"{row.get('name') or 'a GPU'} has no tensor clock in the spec table"
        num_sum += util * min(clock, tclk) / tclk
        den += util
        clocks.append(_inp(f"sm_clock_mhz[{label}]", clock, "MHz", "NVML, latest sample"))
        clocks.append(_inp(f"tensor_clock_mhz[{label}]", tclk, "MHz", "spec table"))
    if not den:
        return None, "no GPU was busy in the latest sample: no clock to weigh"
    return _factor(
        "clocks", "Clocks below the tensor clock", num_sum / den,
        "sum(GPU-Util x min(SM clock, tensor clock) / tensor clock) / sum(GPU-Util)", "steps",
        clocks,
    ), ""


def _covered_rows(
    gpus: dict[str, dict[str, Any]] | None, ladder: dict[str, Any] | None
) -> dict[str, dict[str, Any]]:
    """The latest rows of the GPUs MFU divides by (`ladder.covers`: those the training process
    reported, else every sampled GPU), so that every factor is over the same GPUs as the MFU
    the chain ends at: an idle GPU beside the training's must not weigh in the clocks."""
    rows = gpus or {}
    covers = (ladder or {}).get("covers")
    if not covers:
        return rows
    keep = {str(c) for c in covers}
    return {label: row for label, row in rows.items() if str(label) in keep}


def _time(
    time: dict[str, Any] | None, time_reason: str | None, outside_phase_s: float,
    comm_outside_s: float = 0.0,
) -> tuple[float, float, float, float, list[dict[str, Any]]] | str:
    """(elapsed, window, compute, comm, inputs) from the time split, or why not. The training
    window runs from the first step to the last: elapsed less startup, the tail after the last
    step, and measured phases (data, eval, checkpoints, waits) that fell before or after it.
    `comm` is the exposed wait for other ranks inside the window (0 when not measured)."""
    time = time or {}
    parts = {p.get("name"): p for p in time.get("parts") or []}
    elapsed = num(time.get("elapsed_s"))
    compute = num((parts.get("compute") or {}).get("s"))
    if not elapsed or compute is None:
        return time_reason or "no wall time has passed yet"
    startup = num((parts.get("startup") or {}).get("s")) or 0.0
    after = num((parts.get("after") or {}).get("s")) or 0.0
    comm_part = parts.get("comm") or {}
    comm = (num(comm_part.get("s")) or 0.0) if comm_part.get("measured") else 0.0
    window = elapsed - startup - after - outside_phase_s
    if window <= 0 or compute <= 0:
        return "no time inside the training window yet (fewer than two steps)"
    inputs = [
        _inp(p["name"], p.get("s"), "s", "measured" if p.get("measured") else "remainder")
        for p in time["parts"]
    ]
    inputs.append(_inp("elapsed", elapsed, "s", "time split"))
    inputs.append(
        _inp("phases_outside_window", outside_phase_s, "s",
             "measured phases recorded before the first step or after the last")
    )
    inputs.append(_inp("window", window, "s", "elapsed - startup - after - phases outside it"))
    # the waits in the window: the part less those before the first step or after the last
    comm = max(min(comm - comm_outside_s, window - compute), 0.0)
    return elapsed, window, compute, comm, inputs


def phases_outside_window(
    time: dict[str, Any] | None, before: dict[str, float], tail: dict[str, float]
) -> float:
    """Seconds of measured phases (data, eval, checkpoints, waits for other ranks) recorded
    before the clock rank's first step (`before`, the time ledger's) or, once the run has ended,
    after its last (`tail`): they are outside the training window."""
    time = time or {}
    names = [
        p["name"]
        for p in time.get("parts") or []
        if p.get("measured") and p.get("name") in ("data", "checkpoint", "eval", "comm")
    ]
    outside = sum(before.get(n, 0.0) for n in names)
    return outside + (sum(tail.get(n, 0.0) for n in names) if time.get("finished") else 0.0)


def build(
    *,
    mfu: dict[str, Any] | None,
    mfu_reason: str | None,
    counted: dict[str, Any] | None,
    samples: dict[str, Any] | None,
    ladder: dict[str, Any] | None,
    ladder_reason: str | None,
    ofu: dict[str, Any] | None,
    gpus: dict[str, dict[str, Any]] | None,
    tensor_clocks: dict[str, float | None],
    time: dict[str, Any] | None,
    time_reason: str | None,
    outside_phase_s: float = 0.0,
    comm_outside_s: float = 0.0,
) -> dict[str, Any] | str:
    """The waterfall, or the reason there is none. Its inputs, by name: the MFU (else the
    counted utilization, else the samples' MFU) it ends at; the GPU counters (`ladder`, `ofu`,
    the latest `gpus` rows, and each GPU's tensor clock from its card's spec, looked up once by
    the counters); the time split, and `outside_phase_s`: seconds of measured phases recorded
    before the first step or after the last one (the time ledger knows them), of which
    `comm_outside_s` were waits for other ranks."""
    target = _target(mfu, mfu_reason, counted, samples)
    if isinstance(target, str):
        return target
    value, convention, mfu_from = target
    missing: dict[str, str] = {}
    steps: list[dict[str, Any]] = []
    head: dict[str, Any] | None = None
    timed = _time(time, time_reason, outside_phase_s, comm_outside_s)
    in_steps: float | None = None
    if isinstance(timed, str):
        missing["time_outside_steps"] = timed
    else:
        elapsed, window, compute, comm, inputs = timed
        in_steps = compute / window
        head = _factor(
            "time_outside_window", "Startup and compile, after the last step", window / elapsed,
            "window / elapsed", "run", inputs,
        )
        stepping = compute + comm
        steps.append(
            _factor(
                "time_outside_steps",
                "Data wait, eval, checkpoints between steps",
                stepping / window,
                "(compute + comm) / window" if comm > 0 else "compute / window",
                "steps",
                [
                    _inp("compute", compute, "s", "time split"),
                    *([_inp("comm", comm, "s", "time split, inside the window")] if comm else []),
                    _inp("window", window, "s", "time split"),
                ],
            )
        )
        if comm > 0:
            steps.append(
                _factor(
                    "comm_wait",
                    "Waiting for other ranks (exposed communication, a slow rank)",
                    compute / stepping,
                    "compute / (compute + comm)",
                    "steps",
                    [
                        _inp("compute", compute, "s", "time split"),
                        _inp("comm", comm, "s", "time split: waits in collectives in the window"),
                    ],
                )
            )
    _counters(steps, missing, ladder, ladder_reason, ofu, gpus, tensor_clocks, in_steps)
    steps.append(_gap(steps, missing, value, mfu_from, convention))
    out: dict[str, Any] = {
        "start": 1.0,
        "value": value,
        "convention": convention,
        "factors": ([head] if head else []) + steps,
        "absent": missing,
        "window": (
            "in-steps factors: GPU counters from the latest sample (about 1 s), mean over the GPUs MFU divides by; "
            "MFU from tokens/s over the rate window (the last 30 s while the run goes on, the "
            "steady state once it has ended)"
        ),
    }
    _ends_at(out, mfu, mfu_reason, mfu_from)
    if head is not None:
        out["whole_run"] = {
            "value": head["value"] * value,
            "formula": "window / elapsed x MFU",
            "note": "model FLOPs over the whole wall time as a share of the peak, at the "
            "steady rate",
        }
    return out


def _counters(
    steps: list[dict[str, Any]],
    missing: dict[str, str],
    ladder: dict[str, Any] | None,
    ladder_reason: str | None,
    ofu: dict[str, Any] | None,
    gpus: dict[str, dict[str, Any]] | None,
    tensor_clocks: dict[str, float | None],
    in_steps: float | None,
) -> None:
    """The GPU counters' factors (idle, tensor share, clocks), or why each is absent."""
    busy, basis = _busy(ladder, ladder_reason, in_steps)
    if busy is None:
        missing["gpu_idle"] = basis
        basis = ""
    else:
        steps.append(busy)
    tensor, why = _tensor(ladder, basis)
    if tensor is None:
        missing["tensor_share"] = why if busy is not None else "no GPU counters"
    else:
        steps.append(tensor)
    clocks, why = (
        _clocks(ladder, ofu, gpus, tensor_clocks, basis)
        if busy is not None
        else (None, "no GPU counters")
    )
    if clocks is None:
        missing["clocks"] = why
    else:
        steps.append(clocks)


def _gap(
    steps: list[dict[str, Any]],
    missing: dict[str, str],
    mfu: float,
    mfu_from: str,
    convention: str,
) -> dict[str, Any]:
    """The last factor: the MFU over the product of the measured ones (what they leave)."""
    chain = math.prod(f["value"] for f in steps)
    merged = [
        n for n in ("time_outside_steps", "gpu_idle", "tensor_share", "clocks") if n in missing
    ]
    label = "Executed vs model FLOPs (recompute, non-matmul work, padding)"
    if merged:
        label += "; includes " + ", ".join(n.replace("_", " ") for n in merged) + " (absent)"
    gap = _factor(
        "model_vs_executed", label, mfu / chain,
        "MFU / (" + " x ".join(f["formula"] for f in steps) + ")" if steps else "MFU", "steps",
        [_inp("mfu", mfu, "fraction", f"{mfu_from}, convention {convention}")]
        + [_inp(f["name"], f["value"], "factor", "above") for f in steps],
    )
    if merged:
        gap["merged"] = merged
    return gap


def explain(wf: dict[str, Any], peak_source: str | None) -> dict[str, Any]:
    """The explain entry for the waterfall: its end value and each factor as an input."""
    entry: dict[str, Any] = {
        "value": wf["value"],
        "unit": "fraction of dense peak",
        "formula": " * ".join(f["name"] for f in wf["factors"] if f["scope"] == "steps"),
        "inputs": [
            _inp(f["name"], f["value"], "factor", f["formula"] + f" ({f['scope']})")
            for f in wf["factors"]
        ],
        "convention": wf["convention"],
        "note": "the whole-run factor (window / elapsed) scales the peak to the training "
        "window; the rest multiply to the MFU exactly",
    }
    if peak_source:
        entry["peak_source"] = peak_source
    return entry


def section(*, peak_source: str | None, **inputs: Any) -> Section:
    """`waterfall` and its explain entry, or the reason it is absent (`build`'s inputs by
    name; `peak_source` the dense peak's citation, for the explanation)."""
    wf = build(**inputs)
    if isinstance(wf, str):
        return Section(absent={"waterfall": wf})
    return Section(values={"waterfall": wf}, explain={"waterfall": explain(wf, peak_source)})
