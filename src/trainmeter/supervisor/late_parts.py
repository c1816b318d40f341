"""The samplers, the agentless-python watcher and the live views, loaded late and behind a guard.

`tm` must run the training even when a sampler, the silent-python watcher or a view is missing
or broken (promise 9), and it must start fast, so each part is imported only once the child is
running, and each failure is one warning on stderr. The engine is loaded the same way by
`runlog/engine_load.py` (a replay needs it too). The views are not named here: `cli/run.py`
passes the function that makes them, so the supervisor never imports a view.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

Warn = Callable[[str, str], None]


def load_samplers(
    root_pid: int, run_dir: Path | None, gpus: str | None, warn: Warn
) -> list[Any]:
    """`sources.default_samplers(...)`, or no samplers."""
    try:
        from trainmeter.sources import default_samplers

        return list(default_samplers(root_pid=root_pid, run_dir=run_dir, gpus=gpus, env=os.environ))
    except Exception as exc:  # noqa: BLE001 - a broken sampler costs its samples, not the run
        warn("samplers", f"no GPU/host/node samples: the samplers did not load ({exc!r})")
        return []


def load_watcher(warn: Warn, env: dict[str, str] | None = None) -> Any:
    """The silent-python watcher (`supervisor/agentless.py`), or None.

    It is given the child's environment (PYTHONPATH with or without the agent), not tm's.
    """
    try:
        from trainmeter.supervisor.agentless import SilentPythonWatcher

        return SilentPythonWatcher(env=env) if env is not None else SilentPythonWatcher()
    except Exception as exc:  # noqa: BLE001 - the watcher is optional
        warn("silent_pythons", f"the silent-python watcher is off ({exc!r})")
        return None


def load_observers(
    make: Callable[..., Any] | None, opts: Any, run_dir: Path | None, warn: Warn, stderr: Any = None
) -> list[Any]:
    """`make(opts, run_dir, warn, stderr)`: the live views the caller asked for, or none."""
    if make is None:
        return []
    try:
        return list(make(opts, run_dir, warn, stderr))
    except Exception as exc:  # noqa: BLE001 - a broken view costs the view, not the run
        warn("views", f"the live views are off: they did not load ({exc!r})")
        return []
