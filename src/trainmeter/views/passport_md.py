"""The run passport for people: the compute section of a Hugging Face model card.

`render_markdown(passport)` writes the record `passport.build_passport` made: the totals in one
table, the final value of each series, the plan against the run, where the time and the peak
went, what could not be computed and why, and every number's derivation folded under a
`<details>` block. `fmt`, `LABELS`, `value_text` and `waterfall_rows` serve the HTML report too.
"""

from __future__ import annotations

from typing import Any

from ..snapread import get
from .absent_text import grouped
from .format import amount, duration, fixed, metric
from .markdown_safe import md_code, md_safe
from .memory_text import peak_text
from .passport_model import model_markdown


def fmt(value: float | list[float] | None, unit: str = "") -> str:
    """A number for a person, by the one rule every view follows (`readable.amount`); an absent
    one as "not known"; a range as its two ends."""
    if value is None:
        return "not known"
    if isinstance(value, (list, tuple)):
        return " – ".join(fmt(v, unit) for v in value)
    return amount(value, unit)


LABELS = {
    "wall_time_s": "Wall time",
    "gpu_hours": "GPU-hours",
    "steps": "Steps",
    "tokens": "Tokens",
    "training_flops": "Training FLOPs",
    "flops_per_token": "FLOPs per token",
    "mfu": "MFU",
    "mfu_range": "MFU range (no convention chosen)",
    "counted_utilization": "Counted utilization",
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


def absent_by_reason(absent: dict[str, str]) -> list[tuple[str, list[str]]]:
    """The missing numbers grouped by their cause (`absent_text.grouped`): one line per cause
    reads shorter than the same sentence repeated under each key."""
    return grouped(absent)


def render_markdown(passport: dict[str, Any]) -> str:
    """The compute section of a model card, derivations folded underneath. Every text from
    the run is escaped first (`markdown_safe`): the card is pasted where Markdown renders."""
    name = str((passport.get("run") or {}).get("name") or "unnamed")
    passport = md_safe(passport, keep=frozenset({"formula"}))
    run = passport.get("run", {})
    numbers = passport.get("training", {})
    absent = passport.get("absent", {})
    version = passport.get("software", {}).get("trainmeter")
    lines = [f"## Compute: training run {md_code(name)}", ""]  # a backtick in it included
    lines += [
        "Measured by trainmeter"
        f"{' ' + str(version) if version else ''}; "
        f"started {run.get('start_utc') or 'at an unknown time'}, status {run.get('status')}.",
        "",
        # the sections of a Hugging Face model card, so each pastes under its own heading there
        "### Compute Infrastructure",
        "",
        "| | |",
        "| --- | --- |",
        f"| Hardware | {hardware_line(passport.get('hardware', {}))} |",
    ]
    sw = passport.get("software", {})
    if sw:
        lines.append("| Software | " + ", ".join(f"{k} {v}" for k, v in sw.items()) + " |")
    lines += ["", "### Speeds, Sizes, Times", "", "| Quantity | Value |", "| --- | --- |"]
    for name, label in LABELS.items():
        if name in numbers:  # what was not computed is under "Not computed", once, with why
            lines.append(f"| {label} | {value_text(name, numbers[name])} |")
    for row in passport.get("memory") or []:
        lines.append(f"| Peak memory, {peak_text(row)} |")
    lines.append("")
    lines += model_markdown(passport.get("model"), fmt)
    series = passport.get("series", {})
    if series:
        lines += ["### Final values", "", "| Series | Final value | At step | Points |",
                  "| --- | --- | --- | --- |"]
        for name, s in series.items():
            final = s.get("final")
            shown = "not known" if final is None else metric(final)
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
    wall = get(numbers, "wall_time_s.value")
    if split and wall:
        lines += ["### Where the time went", "", "| Part | Time | Share |", "| --- | --- | --- |"]
        for part in split:
            if part.get("not_measured"):
                lines.append(f"| {part.get('label')} | not measured: {part['not_measured']} | |")
                continue
            share = part["s"] / wall if wall else None
            mark = "" if part.get("measured") else " (remainder)"
            lines.append(f"| {part.get('label')}{mark} | {duration(part['s'])} | {fmt(share, 'fraction')} |")
        lines.append("")
    lines += _md_ranks(passport.get("ranks"))
    lines += _md_waterfall(passport.get("waterfall"))
    if absent:
        lines += ["### Not computed", ""]
        lines += [f"- {', '.join(f'**{n}**' for n in names)}: {reason}"
                  for reason, names in absent_by_reason(absent)]
        lines.append("")
    lines += ["<details>", "<summary>How each number was computed</summary>", ""]
    cited: dict[str, str] = {}  # a peak's citation is printed once, then referred to
    for name, entry in numbers.items():
        lines += _md_derivation(LABELS.get(name, name), entry, cited)
    lines += ["</details>", ""]
    return "\n".join(lines)


def _md_ranks(ranks: Any) -> list[str]:
    """Each rank's step: compute and waiting for the others; the straggler in a sentence."""
    if not isinstance(ranks, dict) or not ranks.get("per_rank"):
        return []
    from .format import ms
    from .straggler_text import sentence

    lines = ["### Ranks: a step, computing and waiting for the others", "",
             "| Rank | Step | Compute | Waiting | Share waiting |", "| --- | --- | --- | --- | --- |"]
    for rank, row in ranks["per_rank"].items():
        lines.append(
            f"| {_cell(rank)} | {ms(row.get('step_s'))} | {ms(row.get('compute_s'))} "
            f"| {ms(row.get('wait_s'))} | {fmt(row.get('wait_share'), 'fraction')} |"
        )
    lines.append("")
    episodes = [e for e in ranks.get("episodes") or [] if isinstance(e, dict)]
    lines += [f"- {sentence(e)}" for e in episodes] or [f"- No straggler: {ranks.get('rule')}"]
    lines.append("")
    return lines


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
            rows.append((f"{f.get('label')} (whole run)", fixed(value), ""))
            continue
        level *= value
        rows.append((str(f.get("label")), fixed(value), fmt(level, "fraction")))
    label = str(wf.get("ends_at_label") or "MFU")
    end = "MFU" if label.startswith("MFU") else label
    rows.append((f"**{end}** (in steps)", "", fmt(wf.get("value"), "fraction")))
    if wf.get("whole_run") is not None:
        rows.append((f"{end} over the whole wall time", "", fmt(wf["whole_run"], "fraction")))
    return rows


def _md_waterfall(wf: Any) -> list[str]:
    """One small table: each factor of the MFU waterfall and the share of the peak after it."""
    rows = waterfall_rows(wf)
    if not rows:
        return []
    kind = (
        f"MFU waterfall, {wf.get('convention')} convention"
        if not wf.get("ends_at_label") or str(wf.get("ends_at_label")).startswith("MFU")
        else f"ends at the {wf['ends_at_label']}, not at an MFU"
    )
    lines = [
        f"### Where the peak went ({kind})", "",
        "| Factor | Kept | Share of the dense peak after it |", "| --- | --- | --- |",
    ]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    lines.append("")
    for name, why in (wf.get("absent") or {}).items():
        lines.append(f"- {name.replace('_', ' ')} not measured: {why}")
    if wf.get("absent"):
        lines.append("")
    return lines


def _cell(value: Any) -> str:
    return "" if value is None else str(value)


def _md_derivation(label: str, entry: dict[str, Any], cited: dict[str, str] | None = None) -> list[str]:
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
        if not entry.get(key):
            continue
        if key == "peak_source" and cited is not None:
            if entry[key] in cited:  # the same card's citation: once is enough
                out.append(f"- {title}: as for {cited[entry[key]]} above")
                continue
            cited[entry[key]] = label
        out.append(f"- {title}: {entry[key]}")
    out.append("")
    return out
