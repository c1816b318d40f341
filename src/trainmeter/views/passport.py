"""The run passport: what a finished run cost and produced, in a form a person can hand on.

`build_passport(snap)` turns a final snapshot into one record: the run, the hardware, the
software, the training totals (GPU-hours, steps, tokens, FLOPs under the named convention, MFU,
throughput, wall time, goodput, energy), the final value of each series, and for every number how
it was computed (formula, inputs, where each came from, the peak's source). `render_markdown`
writes the compute section of a Hugging Face model card from it, with the derivations folded
under a `<details>` block.

What a passport never holds: the host's name, a directory, the environment, a price. The command
line keeps only the base names of paths and loses secret-looking values. A number that could not
be computed is listed under `absent` with its reason, never written as a zero.

Each number's derivation comes from the engine's `snap["explain"][name]` when the engine wrote
one; otherwise from what the snapshot itself says (its `formula`, `source`, `convention` fields),
marked as such.
"""

from __future__ import annotations

import json
import math
import os
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..redact import REDACTED, redact_argv
from .markdown_safe import md_safe

PASSPORT_VERSION = 1
MD_NAME = "passport.md"
JSON_NAME = "passport.json"

#: Values shaped like tokens of common services, hidden wherever they appear in the command line.
_TOKEN_SHAPES = re.compile(
    r"^(hf_[A-Za-z0-9]{8,}|sk-[A-Za-z0-9_-]{8,}|gh[pousr]_[A-Za-z0-9]{8,}|xox[abp]-[A-Za-z0-9-]{8,}"
    r"|AKIA[0-9A-Z]{12,}|[0-9a-f]{40})$"
)


# ---- small helpers ------------------------------------------------------------------------------


def _num(value: Any) -> float | None:
    """A finite number, else None (bools and strings are not numbers here)."""
    if isinstance(value, dict):
        value = value.get("value")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def scrub_command(argv: Any) -> list[str]:
    """The command line with secrets hidden and each path cut to its base name."""
    if not isinstance(argv, list):
        return []
    out: list[str] = []
    for arg in redact_argv([str(a) for a in argv]):
        flag, eq, value = arg.partition("=")
        if eq and flag.startswith("-"):
            out.append(f"{flag}={_scrub_word(value)}")
        else:
            out.append(_scrub_word(arg))
    return out


def _scrub_word(word: str) -> str:
    if word == REDACTED:
        return word
    if _TOKEN_SHAPES.match(word):
        return REDACTED
    if "/" in word or os.sep in word:
        return os.path.basename(word.rstrip("/" + os.sep)) or word
    return word


# ---- the record ---------------------------------------------------------------------------------


def _entry(
    value: float,
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
        "status": _status(run, time_part),
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
    n_gpus, n_source = _gpus(snap)
    if n_gpus and wall is not None:
        b.put(
            "gpu_hours",
            _entry(
                n_gpus * wall / 3600.0, "GPU-h",
                formula="GPUs x wall time / 3600",
                inputs=[_inp("GPUs", n_gpus, "", str(n_source or "snapshot")),
                        _inp("wall time", wall, "s", "measured")],
            ),
            "",
        )
    else:
        b.put(
            "gpu_hours", None,
            "no GPU was seen in this run (a CPU run, or no NVIDIA driver)" if not n_gpus
            else "the wall time is not known",
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
         "moving average of (tokens in a step report / time since the previous report)"),
        ("step_time_s", "s",
         "moving average of (time since the previous step report / steps in the report)"),
    ):
        value = _num(snap.get(name))
        b.put(
            name,
            None if value is None else _entry(value, unit, formula=formula, explain=b.ex(name)),
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
            _entry(
                flops, "FLOP", formula="FLOPs per token x tokens",
                inputs=[_inp("FLOPs per token", fpt_value, "FLOP/token",
                             f"{convention}: {fpt.get('formula')}"),
                        _inp("tokens", tokens, "tokens", "measured")],
                convention=convention,
            ),
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
    if value is None:
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
            parts.append({"name": part.get("name"), "label": part.get("label"),
                          "s": _num(part.get("s")), "measured": bool(part.get("measured"))})
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
        "series": _series(snap),
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
    return _scrub(passport, [p for p in (scrub or []) if p], secrets)


def _scrub(obj: Any, paths: list[str], hosts: list[str]) -> Any:
    """Every string in `obj` with the given paths replaced and host names hidden."""
    host_res = [re.compile(rf"(?<![\w.-]){re.escape(h)}(?![\w-])") for h in hosts if len(h) >= 2]
    paths = sorted({str(p).rstrip("/") for p in paths if len(str(p)) > 1}, key=len, reverse=True)

    def clean(value: Any) -> Any:
        if isinstance(value, str):
            for path in paths:
                value = value.replace(path, "<dir>")
            for pattern in host_res:
                value = pattern.sub("<host>", value)
            return value
        if isinstance(value, dict):
            return {clean(k): clean(v) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    return clean(obj)


# ---- Markdown -----------------------------------------------------------------------------------


def fmt(value: float | None, unit: str = "") -> str:
    """A number for a person: 3 significant digits, thousands as k/M/G/T/P/E for counts."""
    if value is None:
        return "not known"
    if unit == "fraction":
        pct = value * 100
        return f"{pct:.3g}%" if abs(pct) < 10 else f"{pct:.1f}%"
    if unit == "s":
        return _duration(value)
    if unit in ("steps", "tokens") and value == int(value):
        return f"{int(value):,} {unit}"
    if unit == "FLOP" and value:
        mantissa, exponent = f"{value:.3e}".split("e")
        return f"{float(mantissa):.3g}e{int(exponent)} FLOP"
    mag = abs(value)
    for factor, suffix in ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"),
                           (1e3, "k")):
        if mag >= factor:
            return f"{value / factor:.3g}{suffix}" + (f" {unit}" if unit else "")
    text = f"{value:.0f}" if value == int(value) and mag < 1e3 else f"{value:.3g}"
    return text + (f" {unit}" if unit else "")


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.3g} s"
    minutes, sec = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{sec:02d}s" if hours else f"{minutes}m{sec:02d}s"


LABELS = {
    "wall_time_s": "Wall time",
    "gpu_hours": "GPU-hours",
    "steps": "Steps",
    "tokens": "Tokens",
    "training_flops": "Training FLOPs",
    "flops_per_token": "FLOPs per token",
    "mfu": "MFU",
    "ofu": "OFU (from GPU counters)",
    "tokens_per_s": "Throughput",
    "samples_per_s": "Throughput in samples",
    "samples_mfu": "MFU from samples",
    "step_time_s": "Step time",
    "goodput": "Goodput",
    "energy_j": "GPU energy",
    "energy_per_token_j": "Energy per token",
    "progress": "Progress of the budget",
}


def hardware_line(hw: dict[str, Any]) -> str:
    models = hw.get("gpu_models") or {}
    peak = hw.get("peak") or {}
    if hw.get("gpus"):
        name = peak.get("name") or ", ".join(models) or "GPU of unknown model"
        return f"{hw['gpus']} x {name}"
    cores = hw.get("cpu_cores")
    if hw.get("gpus") is None and not cores:
        return "not known (no device was reported)"
    return "CPU only" + (f" ({cores:.0f} cores)" if cores else "")


def value_text(name: str, entry: dict[str, Any]) -> str:
    text = fmt(entry.get("value"), entry.get("unit", ""))
    conv = entry.get("convention")
    if name in ("training_flops", "flops_per_token", "mfu", "samples_mfu") and conv:
        text += f" ({conv} convention)"
    if name == "mfu" and entry.get("peak"):
        text += f", peak: {entry['peak']}"
    return text


def render_markdown(passport: dict[str, Any]) -> str:
    """The compute section of a model card, derivations folded underneath. Every text from
    the run is escaped first (`markdown_safe`): the card is pasted where Markdown renders."""
    passport = md_safe(passport, keep=frozenset({"formula"}))
    run = passport.get("run", {})
    numbers = passport.get("training", {})
    absent = passport.get("absent", {})
    version = passport.get("software", {}).get("trainmeter")
    lines = [f"## Compute: training run `{run.get('name') or 'unnamed'}`", ""]
    lines += [
        "Measured by trainmeter"
        f"{' ' + str(version) if version else ''}; "
        f"started {run.get('start_utc') or 'at an unknown time'}, status {run.get('status')}.",
        "",
        "| Quantity | Value |",
        "| --- | --- |",
        f"| Hardware | {hardware_line(passport.get('hardware', {}))} |",
    ]
    for name, label in LABELS.items():
        if name in numbers:
            lines.append(f"| {label} | {value_text(name, numbers[name])} |")
        elif name in absent and name not in ("progress", "eta_s", "samples_per_s", "samples_mfu"):
            lines.append(f"| {label} | not computed (see below) |")
    sw = passport.get("software", {})
    if sw:
        lines.append("| Software | " + ", ".join(f"{k} {v}" for k, v in sw.items()) + " |")
    lines.append("")
    series = passport.get("series", {})
    if series:
        lines += ["### Final values", "", "| Series | Final value | At step | Points |",
                  "| --- | --- | --- | --- |"]
        for name, s in series.items():
            final = s.get("final")
            shown = "not known" if final is None else f"{final:.6g}"
            lines.append(f"| {name} | {shown} | {_cell(s.get('step'))} | {_cell(s.get('count'))} |")
        lines.append("")
    plan = passport.get("plan") or {}
    if plan:
        lines += ["### Plan against the run", "", "| | Planned | This run |", "| --- | --- | --- |"]
        for key, label, unit in (("mfu", "MFU", "fraction"), ("tokens_per_s", "Tokens/s", "tokens/s"),
                                 ("hours", "Hours", "h")):
            if key in plan:
                row = plan[key]
                lines.append(f"| {label} | {fmt(row['planned'], unit)} | {fmt(row['actual'], unit)} |")
        lines.append("")
    split = passport.get("time_split") or []
    wall = (numbers.get("wall_time_s") or {}).get("value")
    if split and wall:
        lines += ["### Where the time went", "", "| Part | Time | Share |", "| --- | --- | --- |"]
        for part in split:
            share = part["s"] / wall if wall else None
            mark = "" if part.get("measured") else " (remainder)"
            lines.append(f"| {part.get('label')}{mark} | {_duration(part['s'])} | {fmt(share, 'fraction')} |")
        lines.append("")
    lines += _md_waterfall(passport.get("waterfall"))
    if absent:
        lines += ["### Not computed", ""]
        lines += [f"- **{name}**: {reason}" for name, reason in absent.items()]
        lines.append("")
    lines += ["<details>", "<summary>How each number was computed</summary>", ""]
    for name, entry in numbers.items():
        lines += _md_derivation(LABELS.get(name, name), entry)
    lines += ["</details>", ""]
    return "\n".join(lines)


def waterfall_rows(wf: Any) -> list[tuple[str, str, str]]:
    """(factor, kept, share of the dense peak after it) for each row of the waterfall table;
    [] without a waterfall. The whole-run factor scales the peak to the training window and has
    no share; the in-steps factors multiply from 100% down to the MFU."""
    if not isinstance(wf, dict) or not wf.get("factors"):
        return []
    rows: list[tuple[str, str, str]] = []
    level = 1.0
    for f in wf["factors"]:
        value = f.get("value")
        if value is None:
            continue
        if f.get("scope") == "run":
            rows.append((f"{f.get('label')} (whole run)", f"{value:.3f}", ""))
            continue
        level *= value
        rows.append((str(f.get("label")), f"{value:.3f}", fmt(level, "fraction")))
    rows.append(("**MFU** (in steps)", "", fmt(wf.get("value"), "fraction")))
    if wf.get("whole_run") is not None:
        rows.append(("MFU over the whole wall time", "", fmt(wf["whole_run"], "fraction")))
    return rows


def _md_waterfall(wf: Any) -> list[str]:
    """One small table: each factor of the MFU waterfall and the share of the peak after it."""
    rows = waterfall_rows(wf)
    if not rows:
        return []
    lines = [
        f"### Where the peak went (MFU waterfall, {wf.get('convention')} convention)", "",
        "| Factor | Kept | Share of the dense peak after it |", "| --- | --- | --- |",
    ]  # fmt: skip
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    lines.append("")
    for name, why in (wf.get("absent") or {}).items():
        lines.append(f"- {name.replace('_', ' ')} not measured: {why}")
    if wf.get("absent"):
        lines.append("")
    return lines


def _cell(value: Any) -> str:
    return "" if value is None else str(value)


def _md_derivation(label: str, entry: dict[str, Any]) -> list[str]:
    out = [f"**{label}** = {fmt(entry.get('value'), entry.get('unit', ''))}"]
    if entry.get("formula"):
        out[0] += f": `{entry['formula']}`"
    out.append("")
    for inp in entry.get("inputs") or []:
        value = inp.get("value")
        shown = f"{value:.6g}" if isinstance(value, float) else str(value)
        unit = f" {inp['unit']}" if inp.get("unit") not in (None, "", "1") else ""
        out.append(f"- {inp.get('name')}: {shown}{unit} ({inp.get('source')})")
    for key, title in (("convention", "convention"), ("source", "source"), ("note", "note"),
                       ("peak_source", "peak's source")):
        if entry.get(key):
            out.append(f"- {title}: {entry[key]}")
    out.append("")
    return out


# ---- files and the live hook --------------------------------------------------------------------


def scrub_paths(run_dir: Path | None) -> list[str]:
    """The directories a passport must not name: the run's, the project's, the home."""
    paths = [str(Path.home())]
    if run_dir is not None:
        run_dir = Path(run_dir).resolve()
        paths += [str(run_dir), str(run_dir.parent.parent.parent)]
    paths.append(os.getcwd())
    return [p for p in paths if p not in ("/", "")]


def write_passport(run_dir: Path, snap: dict[str, Any]) -> dict[str, Any]:
    """Write `passport.md` and `passport.json` into `run_dir` (atomically); return the record."""
    passport = build_passport(snap, scrub_paths(run_dir))
    _atomic(run_dir / JSON_NAME, json.dumps(passport, indent=2, allow_nan=False) + "\n")
    _atomic(run_dir / MD_NAME, render_markdown(passport))
    return passport


def _atomic(target: Path, text: str) -> None:
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(text, encoding="utf-8", errors="backslashreplace")  # a non-UTF-8 name
    os.replace(tmp, target)


class PassportWriter:
    """The observer that leaves the passport in the run directory when the run ends."""

    name = "passport"

    def __init__(self, run_dir: Path, warn: Any = None) -> None:
        self.run_dir = Path(run_dir)
        self.warn = warn

    def on_finish(self, snap: dict[str, Any]) -> None:
        try:
            write_passport(self.run_dir, snap)
        except OSError as exc:
            if self.warn is not None:
                # The run directory's writes share one warning (the store's key): a full disk
                # that already cost the run log is said once, not again for the passport.
                self.warn("store", f"cannot write the passport ({exc})")
