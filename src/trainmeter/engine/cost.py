"""What the run cost in GPU time and in model FLOPs, explained: `gpu_hours` and `flops_spent`.

`flops_spent` itself is the FLOPs part's (`model_flops.py`); here it gets its explanation, and
the GPU-hours are worked out from the GPUs the ranks use and the run's wall time, so the
passport shows the engine's numbers instead of working out its own.
"""

from __future__ import annotations

from typing import Any

from . import explain
from .section import Section

NO_GPU = "no GPU was seen in this run (a CPU run, or no NVIDIA driver)"


def section(
    *,
    n_gpus: int | None,
    n_gpus_source: str | None,
    elapsed_s: float | None,
    flops_per_token: dict[str, Any] | None,
    tokens_seen: float | None,
    flops_spent: float | None,
) -> Section:
    out = Section()
    if not n_gpus:
        out.absent["gpu_hours"] = NO_GPU
    elif elapsed_s is None:
        out.absent["gpu_hours"] = "the wall time is not known"
    else:
        hours = n_gpus * elapsed_s / 3600.0
        out.values["gpu_hours"] = hours
        out.explain["gpu_hours"] = explain.explanation(
            hours, "GPU-h", "n_gpus * elapsed_s / 3600",
            [
                explain.given("n_gpus", n_gpus, "GPUs", n_gpus_source or "detected"),
                explain.given("elapsed_s", elapsed_s, "s", "measured: run.end - run.start"),
            ],
        )
    if flops_spent is not None and flops_per_token and tokens_seen is not None:
        convention = flops_per_token.get("convention")
        out.explain["flops_spent"] = explain.explanation(
            flops_spent, "FLOP", "flops_per_token * tokens_seen",
            [
                explain.given("flops_per_token", flops_per_token.get("value"), "FLOP/token",
                              f"{convention}: see flops_per_token"),
                explain.given("tokens_seen", tokens_seen, "tokens", "see tokens_seen"),
            ],
            convention=convention,
        )
    return out
