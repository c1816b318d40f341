"""`tm summary` in the terminal: everything the snapshot holds, grouped the way a person asks.

Throughput, FLOPs per token, MFU, the GPUs (ladder, OFU, counters), energy, budget and plan,
where the wall time went, ranks, series, alerts, warnings, what is absent and why, then the
explanation of each derived number when the snapshot carries one. Each group is a small function
that returns nothing when the snapshot has nothing for it, so a CPU run, a crashed run and a
snapshot from an older engine all render. Every number is formatted by `views.terminal`, so it
reads the same here, in the end-of-run line and in the live views.
"""

from __future__ import annotations

import io
import re
from typing import Any

from ..snapread import get, get_dict, get_number
from .format import duration, fixed, ms, percent, si, si_unit
from .insight_text import advice_lines, samples_lines, waterfall_lines, waterfall_title
from .memory_text import alert_numbers, death_lines, memory_lines
from .node_text import node_text
from .terminal import alerts, loss_text, mfu_text, number, plural

Section = tuple[str, list[Any]]  # (title, renderables)

# The time split, one glyph and colour a part, so the bar reads without colour too.
PART_STYLE: dict[str, tuple[str, str]] = {
    "startup": ("▓", "magenta"),
    "data": ("▒", "red"),
    "checkpoint": ("▚", "yellow"),
    "eval": ("▞", "cyan"),
    "compute": ("█", "green"),
    "after": ("░", "blue"),
}
_OTHER_PART = ("▪", "white")

LADDER_COLUMNS = (
    ("gpu_util", "GPU-Util"),
    ("sm_active", "SM active"),
    ("tensor_active", "Tensor active"),
    ("ofu", "OFU"),
    ("mfu", "MFU"),
)


def _text(*parts: Any):
    """A rich Text from (string, style) pairs and plain strings."""
    from rich.text import Text

    out = Text()
    for part in parts:
        if isinstance(part, tuple):
            out.append(part[0], style=part[1])
        elif part:
            out.append(str(part))
    return out


def _grid(rows: list[list[Any]], *, header: list[str] | None = None, pad: int = 2, whole: int = 2):
    """Aligned columns without borders (a table a pipe can read too). The first `whole` columns
    (names and numbers) never wrap; the others (text) wrap in their column."""
    from rich.table import Table

    n = max((len(r) for r in rows), default=0)
    table = Table(
        show_header=header is not None,
        header_style="bold",
        box=None,
        pad_edge=False,
        padding=(0, pad, 0, 0),
        show_edge=False,
    )
    for i in range(n):
        table.add_column((header or [""] * n)[i] if header else "", no_wrap=i < whole)
    for row in rows:
        table.add_row(*[r if r is not None else "" for r in row] + [""] * (n - len(row)))
    return table


def bar(fraction: float, width: int, style: str = "green") -> Any:
    """A progress bar of `width` cells: full blocks, one partial block, then light shade."""
    f = min(max(fraction, 0.0), 1.0)
    eighths = int(round(f * width * 8))
    full, rest = divmod(eighths, 8)
    partial = " ▏▎▍▌▋▊▉"[rest] if rest and full < width else ""
    empty = width - full - len(partial)
    return _text(("█" * full + partial, style), ("░" * empty, "dim"))


def time_bar(parts: list[dict[str, Any]], width: int) -> Any:
    """The time split as one bar: each part a run of its glyph, in proportion to its seconds."""
    shown = [(p, number(p.get("s"))) for p in parts if isinstance(p, dict)]
    shown = [(p, s) for p, s in shown if s is not None and s > 0]
    total = sum(s for _, s in shown)
    if total <= 0 or width <= 0:
        return _text(("(nothing measured yet)", "dim"))
    # largest-remainder rounding, so the cells add up to the width exactly
    raw = [s / total * width for _, s in shown]
    cells = [int(r) for r in raw]
    order = sorted(range(len(raw)), key=lambda i: raw[i] - cells[i], reverse=True)
    for i in order[: width - sum(cells)]:
        cells[i] += 1
    pieces = []
    for (part, _), n in zip(shown, cells, strict=True):
        glyph, style = PART_STYLE.get(str(part.get("name")), _OTHER_PART)
        pieces.append((glyph * n, style))
    return _text(*pieces)


def _part_legend(part: dict[str, Any], total: float | None) -> Any:
    glyph, style = PART_STYLE.get(str(part.get("name")), _OTHER_PART)
    label = part.get("label") or part.get("name")
    s = number(part.get("s"))
    if s is None or (not s and part.get("reason")):  # a zero nobody timed is not a measured one
        why = f" ({part['reason']})" if part.get("reason") else ""
        return _text((glyph, style), f" {label}: ", (f"not measured{why}", "dim"))
    share = f" {percent(s / total)}" if total else ""
    how = "" if part.get("measured", True) else " (the rest)"
    count = f", {part['n']}×" if isinstance(part.get("n"), int) and part["n"] else ""
    return _text((glyph, style), f" {label} ", (duration(s), "bold"), f"{share}{count}{how}")


# ---- the groups ----------------------------------------------------------------------------


def header(snap: dict[str, Any], source: str | None) -> list[Any]:
    run = get_dict(snap, "run") or {}
    head = [(str(run.get("name") or "run"), "bold")]
    if run.get("exit_status") is not None or snap.get("time", {}).get("finished"):
        status = run.get("exit_status")
        death = get_dict(snap, "death") or {}
        if death.get("text"):
            head.append((f"  {death['text']}", "red"))
        elif run.get("signal"):
            head.append((f"  killed by signal {run['signal']}", "red"))
        elif status not in (None, 0):
            head.append((f"  exit {status}", "red"))
        else:
            head.append(("  finished", "green"))
    elif snap:
        head.append(("  running (or cut short)", "yellow"))
    elapsed = get_number(snap, "time.elapsed_s")
    if elapsed is not None:
        head.append(f"  {duration(elapsed)}")
    started = number(run.get("unix_time"))
    if started is not None:
        from datetime import datetime, timezone

        when = datetime.fromtimestamp(started, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        head.append((f"  started {when}", "dim"))
    if run.get("hostname"):
        head.append((f" on {run['hostname']}", "dim"))
    lines = [_text(*head)]
    node = node_text(snap)  # one node of a multi-node job (views/node_text.py)
    if node:
        job = get_dict(snap, "job") or {}
        lines.append(_text((f"{node}, job {job.get('run_id') or '(no run id)'}", "bold")))
    observe = get(snap, "facts.observe_only")
    if isinstance(observe, dict) and observe.get("value"):
        lines.append(_text(("observe-only: ", "bold yellow"), str(observe["value"])))
    if isinstance(run.get("argv"), list) and run["argv"]:
        import shlex

        lines.append(_text(("command ", "dim"), shlex.join(str(a) for a in run["argv"])))
    if source:
        lines.append(_text(("run ", "dim"), source))
    lines.extend(_text(("died ", "bold red"), line) for line in death_lines(snap))
    return lines


def throughput(snap: dict[str, Any]) -> list[Any]:
    rows: list[list[Any]] = []
    tps = number(snap.get("tokens_per_s"))
    window = _window_words(snap.get("rate_window"))
    if tps is not None:
        counted = snap.get("tokens_counted")
        note = ", ".join(x for x in (window, counted and f"counting {counted}") if x)
        rows.append(["tokens/s", _text((si(tps), "bold")), note])
    step_time = number(snap.get("step_time_s"))
    if step_time is not None:
        rows.append(["step time", _text((ms(step_time), "bold")), _spread(snap) or "rank 0"])
    steps = number(snap.get("steps"))
    tokens = number(snap.get("tokens_seen"))
    if steps is not None:
        rows.append(
            ["so far", f"{si(steps)} steps", f"{si(tokens)} tokens" if tokens is not None else ""]
        )
    padding = snap.get("padding")
    if isinstance(padding, dict) and number(padding.get("share")) is not None:
        extra = ""
        if number(padding.get("padded_tokens_per_s")) is not None:
            extra = f"{si(padding['padded_tokens_per_s'])} tok/s with padding"
        rows.append(
            ["padding", _text((percent(padding["share"]), "bold"), " of tokens"), extra]
        )
    return [_grid(rows)] if rows else []


def _window_words(window: Any) -> str:
    """The window the rates are taken over: "steady state, 12.3 s ..." or "last 30 s"."""
    if not isinstance(window, dict) or number(window.get("seconds")) is None:
        return ""
    if window.get("kind") == "steady":
        return f"steady state, {window['seconds']:.3g} s after warm-up"
    return f"last {window['seconds']:.3g} s"


def _spread(snap: dict[str, Any]) -> str:
    """The steady window's step times: "median 12 ms, p10 10 ms, p90 30 ms"."""
    times = snap.get("step_times")
    if not isinstance(times, dict):
        return ""
    parts = [
        f"{label} {ms(times[key])}"
        for label, key in (("median", "median_s"), ("p10", "p10_s"), ("p90", "p90_s"))
        if number(times.get(key)) is not None
    ]
    return ", ".join(parts)


def _chosen_by(snap: dict[str, Any], fpt: dict[str, Any]) -> str:
    """Where the choice and the value came from, each in its own word: a --convention flag is
    `declared` even when the shape it is applied to was detected."""
    facts = get_dict(snap, "facts") or {}
    conv = get_dict(facts, "convention") or {}
    words = []
    if conv.get("source"):
        words.append(f"convention {conv['source']}")
    if fpt.get("source"):
        declared_value = fpt.get("convention") == "declared value" or not conv.get("source")
        words.append(f"{'value' if declared_value else 'shape'} {fpt['source']}")
    return ", ".join(words)


def flops(snap: dict[str, Any]) -> list[Any]:
    conventions = get_dict(snap, "conventions") or {}
    formulas = snap.get("convention_formulas") or {}
    fpt = get_dict(snap, "flops_per_token") or {}
    counted = get_dict(snap, "counted") or {}
    if not conventions and not fpt and not counted:
        return []
    chosen = fpt.get("convention") if number(fpt.get("value")) is not None else None
    rows: list[list[Any]] = []
    names = list(conventions) or ([chosen] if chosen else [])
    for name in names:
        value = conventions.get(name, fpt.get("value") if name == chosen else None)
        mark = _text(("◀ chosen", "bold green"), f" ({_chosen_by(snap, fpt)})") if name == chosen else ""
        formula = formulas.get(name) if name in conventions else fpt.get("formula")
        if not formula and name == chosen and fpt.get("source") == "declared":
            formula = "declared with --flops-per-token"
        rows.append([name, _text((si(value), "bold" if name == chosen else "")),
                     _text((formula or "", "dim")), mark])
    if chosen and chosen not in names:
        rows.append([chosen, si(fpt.get("value")), fpt.get("formula") or "", "◀ chosen"])
    per_token = number(counted.get("per_token"))
    if per_token is not None:
        ratio = (counted.get("against_conventions") or {}).get(chosen) if chosen else None
        vs = f"{fixed(number(ratio), 2)}× {chosen}" if number(ratio) is not None else ""
        rows.append(["counted", _text((si(per_token), "bold")),
                     _text(("executed by the operators, recompute included", "dim")), vs])
    out: list[Any] = [_grid(rows)]
    if chosen is None and fpt:
        rng = fpt.get("range")
        span = f" ({si(rng[0])}..{si(rng[1])})" if isinstance(rng, list) and len(rng) == 2 else ""
        out.append(_text(("no convention chosen", "yellow"), f"{span}: MFU is the range over all of "
                         "them; --convention picks one"))
    params = get_dict(fpt, "params") or {}
    if number(params.get("active")) is not None and number(params.get("total")) is not None:
        out.append(_text("mixture of experts: ", (si(params["active"]), "bold"),
                         f" parameters active per token, of {si(params['total'])} in all"))
    spent = number(snap.get("flops_spent"))
    if spent is not None:
        out.append(_text("spent ", (si_unit(spent, "FLOP"), "bold"), f" ({chosen})"))
    return out


def mfu(snap: dict[str, Any]) -> list[Any]:
    entry = get_dict(snap, "mfu")
    if entry is None:
        return []
    out: list[Any] = []
    text = mfu_text(snap)
    peak = get_dict(snap, "peak") or {}
    n = entry.get("n_gpus")
    peak_flops = number(peak.get("bf16_dense_flops"))
    against = f"{n} × " if n else ""
    against += str(entry.get("peak") or peak.get("name") or "GPU")
    if peak_flops is not None:
        against += f", {peak_flops / 1e12:g} TFLOP/s dense BF16 each"
    label = entry.get("peak_label") or peak.get("label")
    impossible = [a for a in alerts(snap) if a.get("kind") == "mfu_impossible"]
    out.append(_text((text or "MFU", "bold"),
                     ("   impossible: see the alert above", "bold red") if impossible else ""))
    out.append(_text("peak: ", against, (f" ({label})" if label else "", "bold")))
    at = get_dict(entry, "at_precision") or {}
    if number(at.get("value")) is not None:
        out.append(_text((percent(at["value"]), "bold"), f" {at.get('label') or ''}"))
    elif entry.get("precision") not in (None, "bf16") and entry.get("precision_note"):
        out.append(_text((f"{entry['precision']}: {entry['precision_note']}", "dim")))
    by = entry.get("by_convention")
    if isinstance(by, dict) and by:
        cells = []
        for name, value in by.items():
            cells.append((f"{name} {percent(value)}", "bold" if name == entry.get("convention") else ""))
            cells.append("  ")
        out.append(_text("by convention: ", *cells[:-1]))
    counted = get_dict(snap, "counted") or {}
    if number(counted.get("utilization")) is not None:
        out.append(_text(f"counted FLOPs use {percent(counted['utilization'])} of the peak "
                         "(not model FLOPs: recompute included)"))
    source = entry.get("peak_source") or peak.get("source")
    if source:
        out.append(_text(("peak source: ", "dim"), (str(source), "dim")))
    return out


def gpus(snap: dict[str, Any]) -> list[Any]:
    out: list[Any] = []
    ladder = get_dict(snap, "ladder")
    if ladder:
        rows: list[list[Any]] = []
        per_gpu = get_dict(ladder, "gpus") or {}
        for gpu, values in [*per_gpu.items(), ("mean", ladder.get("mean") or {})]:
            name = f"GPU {gpu}" if gpu != "mean" else "all (mean)"
            cells = []
            for key, _ in LADDER_COLUMNS:
                v = number((values or {}).get(key))
                cells.append(percent(v) if v is not None else "-")
            rows.append([name, *cells])
        out.append(_grid(rows, header=["", *(label for _, label in LADDER_COLUMNS)]))
    ofu = get_dict(snap, "ofu")
    if ofu and number(ofu.get("value")) is not None:
        line = [("OFU ", "bold"), (percent(ofu["value"]), "bold"),
                f" ({ofu.get('convention')}, {ofu.get('source')})"]
        gap = get_dict(snap, "mfu_ofu_gap")
        if gap and number(gap.get("value")) is not None:
            line.append(f"   OFU - MFU gap {100 * gap['value']:.1f} points")
        if ofu.get("note"):
            line.append(f"   {ofu['note']}")
        out.append(_text(*line))
    observed = snap.get("flops_observed")
    if isinstance(observed, dict) and number(observed.get("value")) is not None:
        note = f" ({observed['note']})" if observed.get("note") else ""
        out.append(_text("observed ", (si_unit(observed["value"], "FLOP"), "bold"), note))
    intensity = snap.get("arithmetic_intensity")
    if isinstance(intensity, dict) and number(intensity.get("value")) is not None:
        ridge = get_number(snap, "peak.ridge")
        bound = ""
        if ridge is not None:
            side = "memory-bound" if intensity["value"] < ridge else "compute-bound"
            bound = f", ridge {ridge:.0f}: {side}"
        out.append(_text(f"arithmetic intensity {intensity['value']:.3g} "
                         f"{intensity.get('unit', 'FLOP/byte')}{bound}"))
    counters = get_dict(snap, "gpus") or {}
    rows = []
    for gpu, row in counters.items():
        if not isinstance(row, dict):
            continue
        bits = []
        power, limit = number(row.get("power_w")), number(row.get("power_limit_w"))
        if power is not None:
            bits.append(f"{power:.0f}" + (f"/{limit:.0f}" if limit else "") + " W")
        used, total = number(row.get("memory_used_b")), number(row.get("memory_total_b"))
        if used is not None and total:
            bits.append(f"mem {used / 2**30:.1f}/{total / 2**30:.0f} GiB")
        clock = number(row.get("sm_clock_mhz"))
        if clock is not None:
            bits.append(f"{clock:.0f} MHz")
        temp = number(row.get("temperature_c"))
        if temp is not None:
            bits.append(f"{temp:.0f}°C")
        if row.get("throttle"):
            bits.append("throttled: " + ", ".join(map(str, row["throttle"])))
        rows.append([f"GPU {gpu}", str(row.get("name") or ""), ", ".join(bits)])
    if rows:
        out.append(_grid(rows))
    devices = get_dict(snap, "n_gpus")
    if devices and devices.get("source") == "assumed":
        out.append(_text(("GPU count assumed from the visible devices", "dim")))
    return out


def energy(snap: dict[str, Any]) -> list[Any]:
    entry = get_dict(snap, "energy")
    if not entry or number(entry.get("joules")) is None:
        return []
    line = [(si_unit(entry["joules"], "J"), "bold")]
    per_gpu = get_dict(entry, "per_gpu") or {}
    if per_gpu:
        line.append(" (" + ", ".join(f"GPU {g} {si_unit(j, 'J')}" for g, j in per_gpu.items()) + ")")
    if number(entry.get("joules_per_token")) is not None:
        line += ["   ", (si_unit(entry["joules_per_token"], "J"), "bold"), " per token"]
    out = [_text(*line)]
    if entry.get("source"):
        out.append(_text((str(entry["source"]), "dim")))
    return out


def budget(snap: dict[str, Any], width: int) -> list[Any]:
    out: list[Any] = []
    declared = get_dict(snap, "budget")
    progress = number(snap.get("progress"))
    if declared:
        line = [("budget ", ""), (f"{si(declared.get('value'))} {declared.get('unit')}", "bold"),
                f" ({declared.get('source')})"]
        if number(snap.get("budget_tokens")) is not None and declared.get("unit") != "tokens":
            line.append(f" = {si(snap['budget_tokens'])} tokens")
        out.append(_text(*line))
    if progress is not None:
        eta = number(snap.get("eta_s"))
        out.append(_text(bar(progress, max(min(width - 40, 40), 10)), " ",
                         (percent(progress), "bold"),
                         "   ETA " if eta is not None else "",
                         (duration(eta), "bold") if eta is not None else ""))
    required, remaining = number(snap.get("flops_required")), number(snap.get("flops_remaining"))
    if required is not None:
        rest = f", {si_unit(remaining, 'FLOP')} to go" if remaining is not None else ""
        out.append(_text(f"FLOPs {si_unit(snap.get('flops_spent'), 'FLOP')} of "
                         f"{si_unit(required, 'FLOP')}{rest}"))
    plan = get_dict(snap, "plan")
    if plan:
        rows: list[list[Any]] = []
        p = get_dict(plan, "mfu")
        if p is not None:
            measured = number(p.get("measured"))
            rows.append(["MFU", percent(p["planned"]) if number(p.get("planned")) is not None else "?",
                         percent(measured) if measured is not None else "-", p.get("convention") or ""])
        p = get_dict(plan, "tokens_per_s")
        if p is not None:
            rows.append(["tokens/s", si(p.get("planned")), si(p.get("measured")), ""])
        p = get_dict(plan, "hours")
        if p is not None:
            projected = number(p.get("projected"))
            planned = number(p.get("planned"))
            rows.append(["hours", f"{planned:.3g}" if planned is not None else "?",
                         f"{projected:.3g} projected" if projected is not None else "-", ""])
        if rows:
            out.append(_text(("plan vs actual", "bold")))
            out.append(_grid(rows, header=["", "planned", "actual", ""]))
    return out


def time_split(snap: dict[str, Any], width: int) -> list[Any]:
    split = get_dict(snap, "time")
    if not split:
        return []
    parts = [p for p in split.get("parts") or [] if isinstance(p, dict)]
    head = [f"{duration(split.get('elapsed_s'))} elapsed"]
    if number(split.get("goodput")) is not None:
        head += ["   goodput ", (percent(split["goodput"]), "bold")]
    out: list[Any] = [_text(*head)]
    if parts:
        out.append(time_bar(parts, max(min(width - 4, 72), 10)))
        total = sum(number(p.get("s")) or 0.0 for p in parts)
        out.extend(_part_legend(p, total) for p in parts)
    if split.get("remainder_includes"):
        out.append(_text(("compute also holds: " + ", ".join(map(str, split["remainder_includes"])), "dim")))
    return out


def ranks(snap: dict[str, Any]) -> list[Any]:
    entry = get_dict(snap, "ranks")
    if not entry or get_dict(entry, "step_time_s") is None:
        return []
    slowest, fastest = str(entry.get("slowest")), str(entry.get("fastest"))
    rows = []
    for rank, s in entry["step_time_s"].items():
        mark = ("slowest", "bold red") if rank == slowest else ("fastest", "green") if rank == fastest else ""
        rows.append([f"rank {rank}", ms(s), _text(mark) if mark else ""])
    out: list[Any] = [_grid(rows)]
    if number(entry.get("spread")) is not None:
        out.append(_text("spread ", (percent(entry["spread"]), "bold"),
                         f" (rank {slowest} is that much slower than rank {fastest})"))
    return out


def series(snap: dict[str, Any]) -> list[Any]:
    entries = get_dict(snap, "series") or {}
    rows = []
    for name, entry in sorted(entries.items()):
        if not isinstance(entry, dict):
            continue
        key = f" (from {entry['key']})" if entry.get("mapped_by_name") and entry.get("key") else ""
        step = f"step {entry['step']}" if entry.get("step") is not None else ""
        via = entry.get("via") or entry.get("source") or ""
        rows.append([f"{name}{key}", _text((loss_text(entry.get("value")), "bold")),
                     plural(int(entry.get("count") or 0), "value"), step, via])
    return [_grid(rows)] if rows else []


def alert_lines(snap: dict[str, Any]) -> list[Any]:
    rows = [[_text(("! " + str(a.get("kind")), "bold red")),
             str(a.get("message") or "") + alert_numbers(a)] for a in alerts(snap)]
    return [_grid(rows, whole=1)] if rows else []


def warnings(snap: dict[str, Any]) -> list[Any]:
    return [_text(("· ", "yellow"), str(w)) for w in snap.get("warnings") or []]


def facts(snap: dict[str, Any]) -> list[Any]:
    entries = get_dict(snap, "facts") or {}
    rows = []
    for key, fact in sorted(entries.items()):
        if not isinstance(fact, dict):
            continue
        value = fact.get("value")
        note = fact.get("note") or ""
        if number(value) is not None:
            shown = si(value)
        elif isinstance(value, dict) and value.get("name"):
            shown = str(value["name"])  # a device: {name, index, uuid}
        else:
            shown = str(value)
        if len(shown) > 24:  # a reason, not a value: it goes where text may wrap
            shown, note = "(see note)", f"{shown}. {note}".strip(". ") if note else shown
        conflicts = fact.get("conflicts") or []
        if conflicts:
            note += f" (also said: {len(conflicts)} other value{'s' if len(conflicts) > 1 else ''})"
        rows.append([key, _text((shown, "bold")), fact.get("source") or "", _text((note, "dim"))])
    return [_grid(rows)] if rows else []


def node(snap: dict[str, Any]) -> list[Any]:
    out = []
    host = get_dict(snap, "host")
    if host:
        bits = []
        if number(host.get("procs")) is not None:
            bits.append(plural(int(host["procs"]), "process"))
        if number(host.get("cpu_cores")) is not None:
            bits.append(f"{host['cpu_cores']:.1f} cores busy")
        if number(host.get("rss_b")) is not None:
            bits.append(f"{si_unit(host['rss_b'], 'B')} resident")
        out.append(_text(("training tree: ", "dim"), ", ".join(bits)))
    n = get_dict(snap, "node")
    if n:
        bits = []
        cpu = get_dict(n, "cpu") or {}
        if number(cpu.get("idle")) is not None:
            bits.append(f"CPU {percent(1 - cpu['idle'])} busy of {n.get('cores', '?')} cores")
        mem = get_dict(n, "memory") or {}
        if number(mem.get("total_b")) and number(mem.get("available_b")) is not None:
            bits.append(f"memory {si_unit(mem['total_b'] - mem['available_b'], 'B')} of {si_unit(mem['total_b'], 'B')}")
        disk = get_dict(n, "disk") or {}
        if number(disk.get("free_b")) is not None:
            bits.append(f"disk {si_unit(disk['free_b'], 'B')} free")
        if isinstance(n.get("load"), list) and n["load"]:
            bits.append("load " + " ".join(f"{x:.2f}" for x in n["load"] if number(x) is not None))
        out.append(_text(("node: ", "dim"), ", ".join(bits)))
    return out


def absent(snap: dict[str, Any], width: int = 100) -> list[Any]:
    """Every absent number with its reason, whole: keys that share a reason are one group (the
    keys on a line, wrapped between keys), the reason wrapped beneath them, never cut short."""
    import textwrap

    reasons = get_dict(snap, "absent") or {}
    groups: dict[str, list[str]] = {}
    for name, why in sorted(reasons.items()):
        groups.setdefault(" ".join(str(why).split()), []).append(str(name))
    inner = max(width - 4, 30)  # the section indents its body two columns
    out: list[Any] = []
    for why, names in sorted(groups.items(), key=lambda g: g[1][0]):
        keys = textwrap.wrap(", ".join(names) + ":", inner, break_long_words=False,
                             break_on_hyphens=False)
        out.extend(_text((line, "bold")) for line in keys)
        out.extend(
            _text("  " + line)
            for line in textwrap.wrap(why, inner - 2, break_long_words=False,
                                      break_on_hyphens=False)
        )
    return out


def _value_with_unit(value: Any, unit: str) -> str:
    unit = "" if unit in ("1", "") else f" {unit}"  # "1": a pure number
    v = number(value)
    if v is None:
        return f"{value}{unit}"
    return f"{v:.6g}{unit}"


def explain(snap: dict[str, Any]) -> list[Any]:
    """Each derived number with its formula, and each input with its value and provenance."""
    from rich.padding import Padding

    entries = get_dict(snap, "explain") or {}
    mfu_entry = get_dict(snap, "mfu") or {}
    out: list[Any] = []

    def indented(*parts: Any) -> Any:
        return Padding(_text(*parts), (0, 0, 0, 4), expand=False)

    for name, entry in entries.items():
        if not isinstance(entry, dict):
            continue
        head = [(name, "bold"), " = ", (_value_with_unit(entry.get("value"), entry.get("unit") or ""), "bold")]
        if entry.get("convention"):
            head.append(f"  ({entry['convention']})")
        out.append(_text(*head))
        if entry.get("formula"):
            out.append(indented((str(entry["formula"]), "cyan")))
        for inp in entry.get("inputs") or []:
            if not isinstance(inp, dict):
                continue
            src = f"  [{inp['source']}]" if inp.get("source") else ""
            out.append(indented(f"{inp.get('name')} = ",
                                (_value_with_unit(inp.get("value"), inp.get("unit") or ""), "bold"),
                                (src, "dim")))
        if entry.get("peak_source"):
            same = entry["peak_source"] == mfu_entry.get("peak_source")
            out.append(indented(("peak source: " + ("as under MFU above" if same else str(entry["peak_source"])), "dim")))
        if entry.get("note"):
            out.append(indented((f"note: {entry['note']}", "dim")))
    return out


def _plain(lines: list[str]) -> list[Any]:
    """Lines of `views/insight_text.py` as Text (never parsed as rich markup)."""
    return [_text(line) for line in lines if line.strip()]


def _samples_title(snap: dict[str, Any]) -> str:
    """What the samples section is: the measure of a model without tokens, or samples counted
    beside the tokens of one that has them."""
    if number(snap.get("tokens_seen")) or number(snap.get("tokens_per_s")):
        return "Samples (beside the tokens: batch rows per step and per second)"
    return "Samples (a model without tokens)"


def sections(snap: dict[str, Any], width: int) -> list[Section]:
    """The groups in reading order; empty ones are dropped by the renderer."""
    n_alerts = len(alerts(snap))
    n_absent = len(snap.get("absent") or {})
    return [
        (f"Alerts ({n_alerts})", alert_lines(snap)),  # first: what is wrong comes before numbers
        ("Throughput", throughput(snap)),
        ("FLOPs per token", flops(snap)),
        ("MFU", mfu(snap)),
        ("GPUs: utilization ladder and OFU", gpus(snap)),
        ("Energy", energy(snap)),
        ("Budget, progress, plan", budget(snap, width)),
        ("Where the time went", time_split(snap, width)),
        (_samples_title(snap), _plain(samples_lines(snap))),
        (waterfall_title(snap), _plain(waterfall_lines(snap))),
        ("What to try", _plain(advice_lines(snap))),
        ("Ranks (step time)", ranks(snap)),
        ("Memory (per rank)", _plain(memory_lines(snap))),
        ("Series (last value)", series(snap)),
        ("Warnings", warnings(snap)),
        ("Facts (value, provenance)", facts(snap)),
        ("Host and node", node(snap)),
        (f"Absent ({n_absent}): what would enable each", absent(snap, width)),
        ("How each number was worked out", explain(snap)),
    ]


def renderables(snap: dict[str, Any], width: int) -> list[Any]:
    """The groups under their titles, each body indented two columns."""
    from rich.padding import Padding

    out: list[Any] = []
    for title, body in sections(snap, width):
        if not body:
            continue
        style = "bold red" if title.startswith("Alerts") else "bold cyan"
        out.append(_text(""))
        out.append(_text((title, style)))
        out.extend(Padding(item, (0, 0, 0, 2), expand=False) for item in body)
    return out


_TRAILING = re.compile(r"[ ]+((?:\x1b\[[0-9;]*m)*)$")


def render(console: Any, snap: dict[str, Any], source: str | None) -> None:
    """Print the summary on `console`, without the blanks tables pad their lines with."""
    with console.capture() as capture:
        for item in header(snap, source):
            console.print(item, soft_wrap=True)  # a long run path stays one line
        for item in renderables(snap, console.width):
            console.print(item, overflow="fold")
    text = capture.get()
    lines = [_TRAILING.sub(r"\1", line) for line in text.split("\n")]
    console.file.write("\n".join(lines))


def render_plain(snap: dict[str, Any], source: str | None, width: int = 100) -> str:
    from .terminal_console import make_console

    buf = io.StringIO()
    console = make_console(buf, width=width, colour=False)
    render(console, snap, source)
    return buf.getvalue().rstrip("\n")


def summary_text(snap: dict[str, Any], source: str | None = None, width: int = 100) -> str:
    """`tm summary` as plain text (no colour): what a pipe or a file gets."""
    return render_plain(snap, source, width=width)
