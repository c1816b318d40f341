"""A finished run as one Weights & Biases run: the loop's series, trainmeter's numbers, the passport.

History: one `log` call a step, the loop's series under their own names and trainmeter's derived
numbers under `trainmeter/` (tokens/s, MFU, goodput, ...), so they sit beside the loss on the same
step axis. Config: the passport record (hardware, software, totals, each number's provenance).
Summary: the passport's totals under `trainmeter/` and each series' final value.

wandb's own settings apply (WANDB_MODE=offline writes the run locally; WANDB_DIR, WANDB_ENTITY).
Nothing secret is sent: the passport carries no host, directory or environment, and wandb's own
collection of the exporting machine's metadata (host, git, code, system stats) is switched off.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .tables import PREFIX, ExportError, RunTable


def summary_of(passport: dict[str, Any]) -> dict[str, Any]:
    """The passport's totals as flat summary keys (`trainmeter/mfu`, ...), and final values."""
    out: dict[str, Any] = {}
    for name, entry in (passport.get("training") or {}).items():
        if isinstance(entry, dict) and entry.get("value") is not None:
            out[PREFIX + name] = entry["value"]
    for name, series in (passport.get("series") or {}).items():
        if series.get("final") is not None:
            out[name] = series["final"]
    for name, reason in (passport.get("absent") or {}).items():
        out[f"{PREFIX}absent/{name}"] = reason
    return out


def export_wandb(
    table: RunTable,
    passport: dict[str, Any],
    project: str,
    *,
    name: str | None = None,
    entity: str | None = None,
    directory: Path | None = None,
) -> dict[str, Any]:
    """Create the W&B run; return what wandb says about it (id, name, directory, url if online)."""
    try:
        import wandb
    except ImportError:
        raise ExportError("the W&B export needs wandb: pip install wandb") from None
    init: dict[str, Any] = {
        "project": project,
        "name": name or (passport.get("run") or {}).get("name"),
        "config": {"trainmeter": passport},
        "job_type": "trainmeter-export",
        "reinit": "create_new",
        # the exporting machine is not the run's: send nothing about it (host, git, code, stats)
        "settings": wandb.Settings(
            x_disable_meta=True, x_disable_stats=True, disable_git=True, save_code=False,
            console="off",
        ),
    }
    if entity:
        init["entity"] = entity
    if directory is not None:
        init["dir"] = str(directory)
    run = wandb.init(**init)
    try:
        for row in table.records():
            values = {k: v for k, v in row.items() if k != "step" and v is not None}
            if values:
                run.log(values, step=int(row["step"]))
        run.summary.update(summary_of(passport))
        about = {"id": run.id, "name": run.name, "dir": getattr(run, "dir", None),
                 "url": getattr(run, "url", None)}
    finally:
        run.finish()
    return about
