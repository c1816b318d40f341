"""A run as one row of the runs page and one column of runs side by side: pure, snapshot in.

`tm runs --web` lists every run with its status, cause of death and headline numbers, and
`tm compare A B ... --web` puts several runs' settings and numbers in one table, differences
highlighted: both read these rows. Numbers are exact (the page formats them by the one rule);
a number a run does not have is None, never zero.
"""

from __future__ import annotations

from typing import Any

from ..snapread import finite_value as _num
from ..snapread import get, get_dict
from .format import si

#: The loop's series a comparison draws as "the loss", first found first.
LOSS_SERIES = ("train_loss", "loss", "val_loss", "eval_loss")
#: The series a comparison overlays (the loss ones, and the engine's numbers over the run).
COMPARED_SERIES = (*LOSS_SERIES, "tokens_per_s", "mfu", "step_time_s", "gpu_memory_used_b",
                   "memory_reserved_b", "host_rss_b")


def _fact(snap: dict[str, Any], key: str) -> Any:
    fact = get_dict(snap, f"facts.{key}") or {}
    return fact.get("value")


def final_loss(snap: dict[str, Any]) -> float | None:
    """The training loss the loop logged last (its first loss-like series), or None."""
    series = get_dict(snap, "series") or {}
    for name in LOSS_SERIES:
        entry = series.get(name)
        if isinstance(entry, dict) and _num(entry.get("value")) is not None:
            return _num(entry.get("value"))
    return None


def memory_peak(snap: dict[str, Any]) -> float | None:
    """The peak memory the run reserved on a GPU, else its processes' resident peak."""
    mem = get_dict(snap, "memory") or {}
    return _num(mem.get("reserved_peak_b")) or _num(mem.get("rss_peak_b"))


def run_row(info: Any) -> dict[str, Any]:
    """What the runs page and the comparison show of a run (`runlog.runs.RunInfo`)."""
    snap = info.snapshot or {}
    run = get_dict(snap, "run") or {}
    mfu = get_dict(snap, "mfu") or {}
    peak = get_dict(snap, "peak") or {}
    budget = get_dict(snap, "budget") or {}
    death = get_dict(snap, "death") or {}
    fpt = get_dict(snap, "flops_per_token") or {}
    status = str(info.status)
    return {
        "dir": info.path.name,
        "name": info.name,
        "start_utc": info.start_utc,
        "duration_s": info.duration_s,
        "status": status,
        "state": _state(status),
        "cause": death.get("text") or (status if _state(status) == "died" else None),
        "command": run.get("argv") if isinstance(run.get("argv"), list) else None,
        "steps": info.steps,
        "tokens": info.tokens,
        "tokens_per_s": info.tokens_per_s,
        "step_time_s": _num(snap.get("step_time_s")),
        "mfu": info.mfu,
        "mfu_convention": info.mfu_convention,
        "mfu_range": mfu.get("range") if isinstance(mfu.get("range"), list) else None,
        "goodput": _num(get(snap, "time.goodput")),
        "loss": final_loss(snap),
        "memory_peak_b": memory_peak(snap),
        "gpus": _num(snap.get("n_gpus")),
        "gpu": peak.get("name"),
        "convention": fpt.get("convention") if _num(fpt.get("value")) is not None else None,
        "flops_per_token": _num(fpt.get("value")),
        "budget": f"{si(budget.get('value'))} {budget.get('unit')}" if budget else None,
        "tokens_per_step": _num(_fact(snap, "tokens_per_step")) or _per_step(info),
        "samples_per_step": _num(_fact(snap, "samples_per_step")),
        "params": _num(_fact(snap, "n_params")),
        "layers": _num(_fact(snap, "n_layers")),
        "d_model": _num(_fact(snap, "d_model")),
        "seq_len": _num(_fact(snap, "seq_len")),
        "precision": mfu.get("precision") if isinstance(mfu.get("precision"), str) else None,
        "tm_version": run.get("tm_version"),
    }


def _per_step(info: Any) -> float | None:
    """Tokens a step over the run, when the loop did not say it: tokens / steps."""
    if info.tokens is None or not info.steps:
        return None
    return info.tokens / info.steps


def _state(status: str) -> str:
    """`finished`, `running` or `died`, the runs page's filter (the status says the rest)."""
    if status == "ok":
        return "finished"
    if status == "running":
        return "running"
    return "died"


def compared_series(dump: dict[str, Any]) -> dict[str, Any]:
    """From a run's bounded history (`History.dump()`), the series a comparison overlays, each
    with its x columns (step, tokens, time) and its last, lowest and highest values."""
    series = dump.get("series") or {}
    out = {}
    for name in COMPARED_SERIES:
        entry = series.get(name)
        if not isinstance(entry, dict):
            continue
        out[name] = {key: entry.get(key) for key in ("label", "unit", "group", "span", "step",
                                                      "tokens", "time", "last", "min", "max")}
    return {"series": out, "axes_absent": dump.get("axes_absent") or {}}
