"""The passport's training numbers: wall time, GPU-hours, steps, tokens, rates, FLOPs, MFU, OFU,
goodput, energy, samples and progress, each with its provenance or its reason for being absent.
"""

from __future__ import annotations

from ..snapread import finite_value as _num
from .format import si_unit
from .passport_entry import Builder, as_dict, input_entry, number_entry


def training_numbers(b: Builder) -> None:
    """Every training number of the passport, in the order the passport lists them."""
    for part in (_counts, _rates, _flops, _mfu, _efficiency, _energy, _samples, _progress):
        part(b)


def _counts(b: Builder) -> None:
    """Wall time, GPU-hours, steps and tokens: what the run did."""
    snap = b.snap
    time_part = as_dict(snap.get("time"))
    run = as_dict(snap.get("run"))
    wall = _num(time_part.get("elapsed_s"))
    if wall is None:
        wall = _num(run.get("elapsed_s"))
    b.put(
        "wall_time_s",
        None
        if wall is None
        else number_entry(
            wall, "s", formula="run.end time - run.start time, on tm's monotonic clock",
            source="measured",
        ),
        "the log has no run.start or no time",
    )
    gpu_hours = _num(snap.get("gpu_hours"))  # the engine's (engine/cost.py), explained there
    b.put(
        "gpu_hours",
        None if gpu_hours is None else number_entry(gpu_hours, "GPU-h", explain=b.ex("gpu_hours")),
        b.absent.get("gpu_hours") or "not computed",
    )
    steps = _num(snap.get("steps"))
    b.put(
        "steps",
        None if steps is None else number_entry(
            steps, "steps", formula="optimizer steps counted by the agent on the step clock rank",
            source="measured",
        ),
        "no step was reported (no agent, or the loop was not recognised)",
    )
    tokens = _num(snap.get("tokens_seen"))
    b.put(
        "tokens",
        None if tokens is None else number_entry(
            tokens, "tokens", formula="sum of the tokens of every counted batch",
            source="measured", counted=snap.get("tokens_counted"),
        ),
        "no token count was reported (no batch shape recognised; declare --tokens-per-step)",
    )


def _rates(b: Builder) -> None:
    """Tokens/s and step time over the steady window, with the step times' spread."""
    snap = b.snap
    for name, unit, formula in (
        ("tokens_per_s", "tokens/s",
         "tokens / wall time over the steady window (end of warm-up to the last step; the "
         "last 30 s while the run goes on)"),
        ("step_time_s", "s", "wall time / steps over the same window"),
    ):
        value = _num(snap.get(name))
        spread = as_dict(snap.get("step_times")) if name == "step_time_s" else {}
        b.put(
            name,
            None if value is None else number_entry(
                value, unit, formula=formula, explain=b.ex(name),
                window=as_dict(snap.get("rate_window")).get("kind"),
                **{k: _num(spread.get(k)) for k in ("median_s", "p10_s", "p90_s")},
            ),
            "no steps to time",
        )


def _flops(b: Builder) -> None:
    """FLOPs per token under the chosen convention and the FLOPs spent, or why not."""
    snap = b.snap
    fpt = as_dict(snap.get("flops_per_token"))
    fpt_value = _num(fpt.get("value"))
    convention = fpt.get("convention")
    if fpt_value is not None:
        b.put(
            "flops_per_token",
            number_entry(
                fpt_value, "FLOP/token", formula=fpt.get("formula"), source=fpt.get("source"),
                explain=b.ex("flops_per_token"), convention=convention,
            ),
            "",
        )
    flops = _num(snap.get("flops_spent"))
    if flops is not None:
        b.put(
            "training_flops",
            number_entry(flops, "FLOP", explain=b.ex("flops_spent"), convention=convention),
            "",
        )
    elif "flops_per_token" in b.absent or fpt_value is None:
        rng = fpt.get("range")
        span = (f" ({si_unit(rng[0], 'FLOP')} to {si_unit(rng[1], 'FLOP')} a token by convention)"
                if isinstance(rng, list) and len(rng) == 2 else "")
        # the engine's own words where it gave them (the FLOPs it needs for the budget say the
        # same, so the passport lists the cause once); the range is in the conventions' table
        reason = b.absent.get("flops_per_token") or b.absent.get("flops_spent") or (
            f"no FLOPs convention chosen{span}: pass --convention" if rng
            else "the model's FLOPs per token are not known"
        )
        b.put("flops_per_token", None, reason)
        b.put("training_flops", None, reason)
        b.absent.pop("flops_spent", None)  # the engine's name for training_flops: said once


def _efficiency(b: Builder) -> None:
    """OFU from the GPU counters, and goodput from the time split."""
    snap = b.snap
    time_part = as_dict(snap.get("time"))
    ofu = as_dict(snap.get("ofu"))
    if _num(ofu.get("value")) is not None:
        b.put(
            "ofu",
            number_entry(
                _num(ofu["value"]), "fraction",
                formula="tensor_active x min(SM clock, tensor clock) / tensor clock, GPU counters averaged",
                source=ofu.get("source"), explain=b.ex("ofu"), convention=ofu.get("convention"),
            ),
            "",
        )
    goodput = _num(time_part.get("goodput"))
    b.put(
        "goodput",
        None if goodput is None else number_entry(
            goodput, "fraction", formula="(compute + data wait inside the step window) / wall time",
            inputs=[input_entry(str(p.get("label") or p.get("name")), _num(p.get("s")), "s",
                         "measured" if p.get("measured") else "the remainder")
                    for p in time_part.get("parts") or [] if isinstance(p, dict)],
            explain=b.ex("goodput"),
        ),
        "no time split (no steps were timed)",
    )


def _energy(b: Builder) -> None:
    """GPU energy and joules per token."""
    snap = b.snap
    tokens = _num(snap.get("tokens_seen"))
    energy = as_dict(snap.get("energy"))
    joules = _num(energy.get("joules"))
    b.put(
        "energy_j",
        None if joules is None else number_entry(
            joules, "J", formula="GPU energy counters: last reading - first reading, summed",
            inputs=[input_entry(f"GPU {k}", _num(v), "J", "NVML")
                    for k, v in as_dict(energy.get("per_gpu")).items()],
            source=energy.get("source"),
        ),
        b.absent.get("energy")
        or "no GPU energy counter was read (no NVIDIA GPU, or the driver does not count energy)",
    )
    b.absent.pop("energy", None)  # the engine's name for energy_j: said once
    per_token = _num(energy.get("joules_per_token"))
    if per_token is not None:
        b.put(
            "energy_per_token_j",
            number_entry(per_token, "J/token", formula="energy / tokens",
                   inputs=[input_entry("energy", joules, "J", "NVML"),
                           input_entry("tokens", tokens, "tokens", "measured")],
                   explain=b.ex("energy_per_token")),
            "",
        )
    elif joules is not None:
        b.put("energy_per_token_j", None, "no token count to divide by")


def _progress(b: Builder) -> None:
    """Progress against the declared budget."""
    snap = b.snap
    progress = _num(snap.get("progress"))
    if progress is not None:
        budget = as_dict(snap.get("budget"))
        b.put(
            "progress",
            number_entry(progress, "fraction", formula="done / budget",
                   inputs=[input_entry("budget", _num(budget.get("value")), str(budget.get("unit")),
                                str(budget.get("source")))],
                   explain=b.ex("progress")),
            "",
        )


def _samples(b: Builder) -> None:
    """Samples/s and, for a model without tokens, its MFU under `counted` (the engine's
    `samples`): shown when measured, never listed as absent (a model with tokens needs neither)."""
    samples = as_dict(b.snap.get("samples"))
    per_s = _num(samples.get("per_s"))
    if per_s is not None:
        b.put(
            "samples_per_s",
            number_entry(per_s, "samples/s", formula="samples per step / step time",
                   source=samples.get("source"), explain=b.ex("samples_per_s")),
            "",
        )
    mfu = as_dict(samples.get("mfu"))
    value = _num(mfu.get("value"))
    if value is not None:
        b.put(
            "samples_mfu",
            number_entry(value, "fraction", formula="FLOPs per step / step time / (GPUs x dense peak)",
                   explain=b.ex("samples_mfu"), convention=mfu.get("convention")),
            "",
        )


def _mfu(b: Builder) -> None:
    snap = b.snap
    mfu = as_dict(snap.get("mfu"))
    value = _num(mfu.get("value"))
    _counted_utilization(b)
    if value is None:
        span = mfu.get("range")
        if isinstance(span, list) and len(span) == 2 and all(_num(v) is not None for v in span):
            b.put(
                "mfu_range",
                number_entry(
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
    peak = as_dict(snap.get("peak"))
    peak_flops = _num(peak.get("bf16_dense_flops"))
    n_gpus = mfu.get("n_gpus")
    b.put(
        "mfu",
        number_entry(
            value, "fraction",
            formula="tokens/s x FLOPs per token / (GPUs x dense peak FLOP/s per GPU)",
            inputs=[
                input_entry("tokens/s", _num(snap.get("tokens_per_s")), "tokens/s", "measured"),
                input_entry("FLOPs per token", _num(snap.get("flops_per_token")), "FLOP/token",
                     str(mfu.get("convention"))),
                input_entry("GPUs", n_gpus, "", str(as_dict(snap.get("n_gpus")).get("source"))),
                input_entry("dense peak", peak_flops, "FLOP/s", str(mfu.get("peak_label")
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


def _counted_utilization(b: Builder) -> None:
    """The counted convention's utilization (FLOPs the operators executed), beside the MFU."""
    counted = as_dict(b.snap.get("counted"))
    value = _num(counted.get("utilization"))
    if value is None:
        return
    b.put(
        "counted_utilization",
        number_entry(
            value, "fraction",
            formula="tokens/s x counted FLOPs per token / (GPUs x dense peak FLOP/s per GPU)",
            inputs=[
                input_entry("tokens/s", _num(b.snap.get("tokens_per_s")), "tokens/s", "measured"),
                input_entry("counted FLOPs per token", _num(counted.get("per_token")), "FLOP/token",
                     str(counted.get("source"))),
            ],
            convention="counted",
            note=counted.get("note"),
        ),
        "",
    )
