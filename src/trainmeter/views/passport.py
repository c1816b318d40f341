"""The run passport: what a finished run cost and produced, in a form a person can hand on.

`build_passport(snap)` turns a final snapshot into one record (this module);
`passport_md.render_markdown` writes it for people, `passport_files` leaves both files in the run
directory, and `redact.py` scrubs what is handed on. The record holds: the run, the hardware, the
software, the training totals (GPU-hours, steps, tokens, FLOPs under the named convention, MFU,
throughput, wall time, goodput, energy), the final value of each series, and for every number how
it was computed (formula, inputs, where each came from, the peak's source). The Markdown is the
compute section of a Hugging Face model card, with the derivations folded under `<details>`.

What a passport never holds: the host's name, a directory, the environment, a price. The command
line keeps only the base names of paths and loses secret-looking values. A number that could not
be computed is listed under `absent` with its reason, never written as a zero.

Each number's derivation comes from the engine's `snap["explain"][name]` when the engine wrote
one; otherwise from what the snapshot itself says (its `formula`, `source`, `convention` fields),
marked as such.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from ..redact import scrub_command, scrub_strings
from ..snapread import finite_value as _num
from .memory_text import peak_per_gpu
from .passport_model import model_section

PASSPORT_VERSION = 1

# ---- small helpers ------------------------------------------------------------------------------


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


# ---- the record ---------------------------------------------------------------------------------


def _entry(
    value: float | list[float],
    unit: str,
    *,
    formula: str | None = None,
    inputs: list[dict[str, Any]] | None = None,
    source: str | None = None,
    explain: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """One number with its provenance; the engine's explanation wins where it has one."""
    entry: dict[str, Any] = {"value": value, "unit": unit}
    if explain:
        entry["formula"] = explain.get("formula") or formula
        entry["inputs"] = list(explain.get("inputs") or inputs or [])
        for key in ("convention", "peak_source", "note"):
            if explain.get(key):
                entry[key] = explain[key]
        entry["explained_by"] = "engine"
    else:
        if formula:
            entry["formula"] = formula
        entry["inputs"] = list(inputs or [])
        entry["explained_by"] = "snapshot"
    if source:
        entry["source"] = source
    for key, val in extra.items():
        if val is not None and key not in entry:
            entry[key] = val
    return entry


def _inp(name: str, value: Any, unit: str, source: str) -> dict[str, Any]:
    return {"name": name, "value": value, "unit": unit, "source": source}


class _Builder:
    def __init__(self, snap: dict[str, Any]) -> None:
        self.snap = snap
        self.explain = _dict(snap.get("explain"))
        self.numbers: dict[str, dict[str, Any]] = {}
        self.absent: dict[str, str] = {
            str(k): str(v) for k, v in _dict(snap.get("absent")).items()
        }

    def put(self, name: str, entry: dict[str, Any] | None, reason: str) -> None:
        if entry is not None:
            self.numbers[name] = entry
            self.absent.pop(name, None)
        else:
            self.absent.setdefault(name, reason)

    def ex(self, name: str) -> dict[str, Any] | None:
        found = self.explain.get(name)
        return found if isinstance(found, dict) else None


def _gpus(snap: dict[str, Any]) -> tuple[int | None, str | None]:
    n = _num(snap.get("n_gpus"))
    source = _dict(snap.get("n_gpus")).get("source")
    return (int(n) if n is not None else None), source


def _hardware(snap: dict[str, Any]) -> dict[str, Any]:
    n_gpus, n_source = _gpus(snap)
    names: dict[str, int] = {}
    for dev in snap.get("devices") or []:
        if isinstance(dev, dict) and dev.get("name"):
            names[str(dev["name"])] = names.get(str(dev["name"]), 0) + 1
    peak = _dict(snap.get("peak"))
    node = _dict(snap.get("node"))
    hw: dict[str, Any] = {
        "gpus": n_gpus,
        "gpus_source": n_source,
        "gpu_models": names,
        "peak": {
            "name": peak.get("name"),
            "bf16_dense_flops_per_gpu": _num(peak.get("bf16_dense_flops")),
            "hbm_bytes_per_s": _num(peak.get("hbm_bytes_per_s")),
            "label": peak.get("label"),
            "source": peak.get("source"),
        }
        if peak
        else None,
        "cpu_cores": _num(node.get("cores")),
        "gpu_memory_b": sorted({int(m) for m in (
            _num(_dict(g).get("memory_total_b")) for g in _dict(snap.get("gpus")).values()
        ) if m}) or None,
    }
    return hw


def _software(snap: dict[str, Any]) -> dict[str, Any]:
    run = _dict(snap.get("run"))
    agent = _dict(snap.get("agent"))
    sw: dict[str, Any] = {"trainmeter": run.get("tm_version")}
    sw["python"] = agent.get("python") or run.get("python")
    for name, version in sorted(_dict(agent.get("versions")).items()):
        sw[str(name)] = version
    gv = _dict(snap.get("gpu_versions"))
    if gv.get("driver"):
        sw["nvidia_driver"] = gv["driver"]
    if gv.get("cuda"):
        sw["cuda_driver_api"] = gv["cuda"]
    return {k: v for k, v in sw.items() if v is not None}


def _status(run: dict[str, Any], time_part: dict[str, Any]) -> str:
    if run.get("signal"):
        return f"signal {run['signal']}"
    status = run.get("exit_status")
    if isinstance(status, int):
        return "ok" if status == 0 else f"exit {status}"
    return "finished" if time_part.get("finished") else "no end recorded"


def _run(snap: dict[str, Any]) -> dict[str, Any]:
    run = _dict(snap.get("run"))
    time_part = _dict(snap.get("time"))
    start = _num(run.get("unix_time"))
    out: dict[str, Any] = {
        "name": run.get("name"),
        "command": scrub_command(run.get("argv")),
        "status": _dict(snap.get("death")).get("text") or _status(run, time_part),
        "exit_status": run.get("exit_status"),
        "start_utc": None,
        "end_utc": None,
    }
    wall = _num(time_part.get("elapsed_s")) or _num(run.get("elapsed_s"))
    if start is not None:
        out["start_utc"] = _iso(start)
        if wall is not None:
            out["end_utc"] = _iso(start + wall)
    return out


def _iso(unix: float) -> str:
    return datetime.fromtimestamp(unix, timezone.utc).isoformat(timespec="seconds")


def _training(b: _Builder) -> None:
    snap = b.snap
    time_part = _dict(snap.get("time"))
    run = _dict(snap.get("run"))
    wall = _num(time_part.get("elapsed_s"))
    if wall is None:
        wall = _num(run.get("elapsed_s"))
    b.put(
        "wall_time_s",
        None
        if wall is None
        else _entry(
            wall, "s", formula="run.end time - run.start time, on tm's monotonic clock",
            source="measured",
        ),
        "the log has no run.start or no time",
    )
    gpu_hours = _num(snap.get("gpu_hours"))  # the engine's (engine/cost.py), explained there
    b.put(
        "gpu_hours",
        None if gpu_hours is None else _entry(gpu_hours, "GPU-h", explain=b.ex("gpu_hours")),
        b.absent.get("gpu_hours") or "not computed",
    )
    steps = _num(snap.get("steps"))
    b.put(
        "steps",
        None if steps is None else _entry(
            steps, "steps", formula="optimizer steps counted by the agent on the step clock rank",
            source="measured",
        ),
        "no step was reported (no agent, or the loop was not recognised)",
    )
    tokens = _num(snap.get("tokens_seen"))
    b.put(
        "tokens",
        None if tokens is None else _entry(
            tokens, "tokens", formula="sum of the tokens of every counted batch",
            source="measured", counted=snap.get("tokens_counted"),
        ),
        "no token count was reported (no batch shape recognised; declare --tokens-per-step)",
    )
    for name, unit, formula in (
        ("tokens_per_s", "tokens/s",
         "tokens / wall time over the steady window (end of warm-up to the last step; the "
         "last 30 s while the run goes on)"),
        ("step_time_s", "s", "wall time / steps over the same window"),
    ):
        value = _num(snap.get(name))
        spread = _dict(snap.get("step_times")) if name == "step_time_s" else {}
        b.put(
            name,
            None if value is None else _entry(
                value, unit, formula=formula, explain=b.ex(name),
                window=_dict(snap.get("rate_window")).get("kind"),
                **{k: _num(spread.get(k)) for k in ("median_s", "p10_s", "p90_s")},
            ),
            "no steps to time",
        )
    fpt = _dict(snap.get("flops_per_token"))
    fpt_value = _num(fpt.get("value"))
    convention = fpt.get("convention")
    if fpt_value is not None:
        b.put(
            "flops_per_token",
            _entry(
                fpt_value, "FLOP/token", formula=fpt.get("formula"), source=fpt.get("source"),
                explain=b.ex("flops_per_token"), convention=convention,
            ),
            "",
        )
    flops = _num(snap.get("flops_spent"))
    if flops is not None:
        b.put(
            "training_flops",
            _entry(flops, "FLOP", explain=b.ex("flops_spent"), convention=convention),
            "",
        )
    elif "flops_per_token" in b.absent or fpt_value is None:
        reason = b.absent.get("flops_per_token") or (
            f"no FLOPs convention chosen (range {fpt.get('range')}): pass --convention"
            if fpt.get("range") else "the model's FLOPs per token are not known"
        )
        b.put("flops_per_token", None, reason)
        b.put("training_flops", None, reason)
    _mfu(b)
    ofu = _dict(snap.get("ofu"))
    if _num(ofu.get("value")) is not None:
        b.put(
            "ofu",
            _entry(
                _num(ofu["value"]), "fraction",
                formula="tensor_active x min(SM clock, tensor clock) / tensor clock, GPU counters averaged",
                source=ofu.get("source"), explain=b.ex("ofu"), convention=ofu.get("convention"),
            ),
            "",
        )
    goodput = _num(time_part.get("goodput"))
    b.put(
        "goodput",
        None if goodput is None else _entry(
            goodput, "fraction", formula="(compute + data wait inside the step window) / wall time",
            inputs=[_inp(str(p.get("label") or p.get("name")), _num(p.get("s")), "s",
                         "measured" if p.get("measured") else "the remainder")
                    for p in time_part.get("parts") or [] if isinstance(p, dict)],
            explain=b.ex("goodput"),
        ),
        "no time split (no steps were timed)",
    )
    energy = _dict(snap.get("energy"))
    joules = _num(energy.get("joules"))
    b.put(
        "energy_j",
        None if joules is None else _entry(
            joules, "J", formula="GPU energy counters: last reading - first reading, summed",
            inputs=[_inp(f"GPU {k}", _num(v), "J", "NVML")
                    for k, v in _dict(energy.get("per_gpu")).items()],
            source=energy.get("source"),
        ),
        "no GPU energy counter was read (no NVIDIA GPU, or the driver does not count energy)",
    )
    per_token = _num(energy.get("joules_per_token"))
    if per_token is not None:
        b.put(
            "energy_per_token_j",
            _entry(per_token, "J/token", formula="energy / tokens",
                   inputs=[_inp("energy", joules, "J", "NVML"),
                           _inp("tokens", tokens, "tokens", "measured")],
                   explain=b.ex("energy_per_token")),
            "",
        )
    elif joules is not None:
        b.put("energy_per_token_j", None, "no token count to divide by")
    _samples(b)
    progress = _num(snap.get("progress"))
    if progress is not None:
        budget = _dict(snap.get("budget"))
        b.put(
            "progress",
            _entry(progress, "fraction", formula="done / budget",
                   inputs=[_inp("budget", _num(budget.get("value")), str(budget.get("unit")),
                                str(budget.get("source")))],
                   explain=b.ex("progress")),
            "",
        )


def _samples(b: _Builder) -> None:
    """Samples/s and, for a model without tokens, its MFU under `counted` (the engine's
    `samples`): shown when measured, never listed as absent (a model with tokens needs neither)."""
    samples = _dict(b.snap.get("samples"))
    per_s = _num(samples.get("per_s"))
    if per_s is not None:
        b.put(
            "samples_per_s",
            _entry(per_s, "samples/s", formula="samples per step / step time",
                   source=samples.get("source"), explain=b.ex("samples_per_s")),
            "",
        )
    mfu = _dict(samples.get("mfu"))
    value = _num(mfu.get("value"))
    if value is not None:
        b.put(
            "samples_mfu",
            _entry(value, "fraction", formula="FLOPs per step / step time / (GPUs x dense peak)",
                   explain=b.ex("samples_mfu"), convention=mfu.get("convention")),
            "",
        )


def _waterfall(snap: dict[str, Any]) -> dict[str, Any] | None:
    """The MFU waterfall in short (each factor's name, label, value and scope), or None."""
    wf = _dict(snap.get("waterfall"))
    factors = [f for f in wf.get("factors") or [] if isinstance(f, dict)]
    if not factors or _num(wf.get("value")) is None:
        return None
    return {
        "convention": wf.get("convention"),
        "ends_at_label": wf.get("ends_at_label"),
        "value": _num(wf.get("value")),
        "whole_run": _num(_dict(wf.get("whole_run")).get("value")),
        "factors": [
            {"name": f.get("name"), "label": f.get("label"), "value": _num(f.get("value")),
             "scope": f.get("scope")}
            for f in factors
        ],
        "absent": {str(k): str(v) for k, v in _dict(wf.get("absent")).items()},
    }


def _mfu(b: _Builder) -> None:
    snap = b.snap
    mfu = _dict(snap.get("mfu"))
    value = _num(mfu.get("value"))
    _counted_utilization(b)
    if value is None:
        span = mfu.get("range")
        if isinstance(span, list) and len(span) == 2 and all(_num(v) is not None for v in span):
            b.put(
                "mfu_range",
                _entry(
                    [float(span[0]), float(span[1])], "fraction",
                    formula="tokens/s x FLOPs per token / (GPUs x dense peak), under every "
                    "FLOPs convention: the lowest and the highest",
                    by_convention=mfu.get("by_convention"),
                    note="no FLOPs convention was chosen: pass --convention for one MFU",
                ),
                "",
            )
            b.put("mfu", None, "no FLOPs convention chosen: the MFU is the range under "
                  "mfu_range (pass --convention for one value)")
            return
        b.put("mfu", None, b.absent.get("mfu") or "no dense peak or no FLOPs convention")
        return
    peak = _dict(snap.get("peak"))
    peak_flops = _num(peak.get("bf16_dense_flops"))
    n_gpus = mfu.get("n_gpus")
    b.put(
        "mfu",
        _entry(
            value, "fraction",
            formula="tokens/s x FLOPs per token / (GPUs x dense peak FLOP/s per GPU)",
            inputs=[
                _inp("tokens/s", _num(snap.get("tokens_per_s")), "tokens/s", "measured"),
                _inp("FLOPs per token", _num(snap.get("flops_per_token")), "FLOP/token",
                     str(mfu.get("convention"))),
                _inp("GPUs", n_gpus, "", str(_dict(snap.get("n_gpus")).get("source"))),
                _inp("dense peak", peak_flops, "FLOP/s", str(mfu.get("peak_label")
                                                             or peak.get("label"))),
            ],
            explain=b.ex("mfu"),
            convention=mfu.get("convention"),
            peak=mfu.get("peak"),
            peak_source=mfu.get("peak_source") or peak.get("source"),
            by_convention=mfu.get("by_convention"),
        ),
        "",
    )


def _counted_utilization(b: _Builder) -> None:
    """The counted convention's utilization (FLOPs the operators executed), beside the MFU."""
    counted = _dict(b.snap.get("counted"))
    value = _num(counted.get("utilization"))
    if value is None:
        return
    b.put(
        "counted_utilization",
        _entry(
            value, "fraction",
            formula="tokens/s x counted FLOPs per token / (GPUs x dense peak FLOP/s per GPU)",
            inputs=[
                _inp("tokens/s", _num(b.snap.get("tokens_per_s")), "tokens/s", "measured"),
                _inp("counted FLOPs per token", _num(counted.get("per_token")), "FLOP/token",
                     str(counted.get("source"))),
            ],
            convention="counted",
            note=counted.get("note"),
        ),
        "",
    )


def _series(snap: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, entry in sorted(_dict(snap.get("series")).items()):
        entry = _dict(entry)
        out[str(name)] = {
            "final": _num(entry.get("value")),
            "step": entry.get("step"),
            "count": entry.get("count"),
            "source": entry.get("source"),
            "via": entry.get("via"),
        }
    return out


def _time_split(snap: dict[str, Any]) -> list[dict[str, Any]]:
    parts = []
    for part in _dict(snap.get("time")).get("parts") or []:
        if isinstance(part, dict) and _num(part.get("s")) is not None:
            entry = {"name": part.get("name"), "label": part.get("label"),
                     "s": _num(part.get("s")), "measured": bool(part.get("measured"))}
            if part.get("reason") and not _num(part.get("s")):  # a zero nobody timed
                entry["not_measured"] = str(part["reason"])
            parts.append(entry)
    return parts


def _plan(snap: dict[str, Any]) -> dict[str, Any] | None:
    """What was declared beside what the run did: MFU, tokens/s, hours (None: no plan)."""
    plan = _dict(snap.get("plan"))
    out: dict[str, Any] = {}
    for key, planned, actual in (("mfu", "planned", "measured"),
                                 ("tokens_per_s", "planned", "measured"),
                                 ("hours", "planned", "projected")):
        part = _dict(plan.get(key))
        if part:
            out[key] = {"planned": _num(part.get(planned)), "actual": _num(part.get(actual))}
            if part.get("convention"):
                out[key]["convention"] = part["convention"]
    return out or None


def build_passport(snap: dict[str, Any], scrub: list[str] | None = None) -> dict[str, Any]:
    """The passport record of a final snapshot. `scrub`: paths that must appear nowhere in it."""
    b = _Builder(snap)
    _training(b)
    # absent numbers nobody asked for in a finished run's passport
    for key in ("eta_s", "plan"):
        b.absent.pop(key, None)
    passport = {
        "passport_version": PASSPORT_VERSION,
        "run": _run(snap),
        "hardware": _hardware(snap),
        "software": _software(snap),
        "training": b.numbers,
        "time_split": _time_split(snap),
        "model": model_section(snap),
        "series": _series(snap),
        "memory": peak_per_gpu(snap),
        "facts": {
            str(k): {"value": v.get("value"), "source": v.get("source"), "note": v.get("note")}
            for k, v in _dict(snap.get("facts")).items()
            if isinstance(v, dict)
        },
        "alerts": [str(a.get("message")) for a in snap.get("alerts") or [] if isinstance(a, dict)],
        "plan": _plan(snap),
        "waterfall": _waterfall(snap),
        "absent": dict(sorted(b.absent.items())),
    }
    run = _dict(snap.get("run"))
    secrets = [run.get("hostname")] if run.get("hostname") else []
    return scrub_strings(passport, [p for p in (scrub or []) if p], secrets)
