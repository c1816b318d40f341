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

The parts: `passport_entry` (a number with its provenance), `passport_context` (run, hardware,
software), `passport_training` (the training numbers), `passport_sections` (series, time split,
each rank's compute and wait, plan, waterfall), `passport_model` (the model's shape and FLOPs per token by convention).
"""

from __future__ import annotations

from typing import Any

from ..redact import scrub_strings
from .memory_text import peak_per_gpu
from .passport_context import hardware_section, run_section, software_section
from .passport_entry import Builder, as_dict
from .passport_model import model_section
from .passport_sections import (
    plan_section,
    ranks_section,
    series_section,
    time_split_section,
    waterfall_section,
)
from .passport_training import training_numbers

PASSPORT_VERSION = 1


def build_passport(snap: dict[str, Any], scrub: list[str] | None = None) -> dict[str, Any]:
    """The passport record of a final snapshot. `scrub`: paths that must appear nowhere in it."""
    b = Builder(snap)
    training_numbers(b)
    # absent numbers nobody asked for in a finished run's passport
    for key in ("eta_s", "plan"):
        b.absent.pop(key, None)
    passport = {
        "passport_version": PASSPORT_VERSION,
        "run": run_section(snap),
        "hardware": hardware_section(snap),
        "software": software_section(snap),
        "training": b.numbers,
        "time_split": time_split_section(snap),
        "ranks": ranks_section(snap),
        "model": model_section(snap),
        "series": series_section(snap),
        "memory": peak_per_gpu(snap),
        "facts": {
            str(k): {"value": v.get("value"), "source": v.get("source"), "note": v.get("note")}
            for k, v in as_dict(snap.get("facts")).items()
            if isinstance(v, dict)
        },
        "alerts": [str(a.get("message")) for a in snap.get("alerts") or [] if isinstance(a, dict)],
        "plan": plan_section(snap),
        "waterfall": waterfall_section(snap),
        "absent": dict(sorted(b.absent.items())),
    }
    run = as_dict(snap.get("run"))
    secrets = [run.get("hostname")] if run.get("hostname") else []
    return scrub_strings(passport, [p for p in (scrub or []) if p], secrets)
