"""The snapshot's top-level keys, as docs/snapshot.md documents them (a test keeps the two
equal). A view that builds a snapshot of its own (the job of several nodes) checks itself
against this list: each key is there, or in `absent` with the reason."""

from __future__ import annotations

TOP_LEVEL_KEYS: frozenset[str] = frozenset(
    {
        "absent", "advice", "agent", "alerts", "arithmetic_intensity", "budget", "budget_tokens", "comm",
        "convention_formulas", "conventions", "counted", "death", "devices", "energy", "eta_s", "explain",
        "facts", "flops_observed", "flops_per_token", "flops_remaining", "flops_required",
        "flops_spent", "gpu_hours", "gpu_versions", "gpus", "host", "job", "ladder", "log", "memory", "mfu",
        "mfu_ofu_gap", "models", "n_gpus", "node", "ofu", "padding", "peak", "plan", "progress", "ranks",
        "rate_window", "records", "run", "samples", "series", "step_index", "step_time_s",
        "step_times", "steps", "straggler", "time", "tokens_counted", "tokens_per_s", "tokens_seen",
        "warnings", "waterfall",
    }
)

#: Keys that are lists or maps always present, never "absent".
STRUCTURAL = frozenset({"absent", "warnings", "alerts"})
