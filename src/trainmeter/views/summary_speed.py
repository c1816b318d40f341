"""`tm summary`'s throughput, FLOPs per token and MFU groups: how fast, and against what."""

from __future__ import annotations

from typing import Any

from ..snapread import get_dict
from .format import duration, fixed, ms, percent, si, si_unit
from .summary_blocks import _grid, _text
from .terminal import alerts, mfu_text, number


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
        return f"steady state, {duration(window['seconds'])} after warm-up"
    return f"last {duration(window['seconds'])}"


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
        rows.append([name, _text((si_unit(value, "FLOP"), "bold" if name == chosen else "")),
                     _text((formula or "", "dim")), mark])
    if chosen and chosen not in names:
        rows.append([chosen, si_unit(fpt.get("value"), "FLOP"), fpt.get("formula") or "", "◀ chosen"])
    per_token = number(counted.get("per_token"))
    if per_token is not None:
        ratio = (counted.get("against_conventions") or {}).get(chosen) if chosen else None
        vs = f"{fixed(number(ratio), 2)}× {chosen}" if number(ratio) is not None else ""
        rows.append(["counted", _text((si_unit(per_token, "FLOP"), "bold")),
                     _text(("executed by the operators, recompute included", "dim")), vs])
    out: list[Any] = [_grid(rows)]
    if chosen is None and fpt:
        rng = fpt.get("range")
        span = (f" ({si_unit(rng[0], 'FLOP')} to {si_unit(rng[1], 'FLOP')} a token)"
                if isinstance(rng, list) and len(rng) == 2 else "")
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
        against += f", {si_unit(peak_flops, 'FLOP/s')} dense BF16 each"
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
