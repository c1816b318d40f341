"""The engine, the samplers and the agentless-python watcher, imported late and behind a guard.

`tm` must run the training even when the engine, a sampler or the silent-python watcher is
missing or broken (promise 9), and it must start fast, so each part is imported only once the
child is running, and each failure is one warning on stderr.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

Warn = Callable[[str, str], None]


def load_engine_factory(warn: Warn) -> tuple[Callable[[], Any] | None, str | None]:
    """The `Engine` class, or None and the reason."""
    try:
        from trainmeter.engine import Engine
    except Exception as exc:  # noqa: BLE001 - a broken engine costs the summary, not the run
        reason = f"the engine could not be loaded ({exc!r})"
        warn("engine", f"{reason}; the run is logged but not summarized")
        return None, reason
    return Engine, None


def make_engine(factory: Callable[[], Any] | None, warn: Warn) -> tuple[Any, str | None]:
    if factory is None:
        return None, "the engine could not be loaded"
    try:
        return factory(), None
    except Exception as exc:  # noqa: BLE001 - a broken engine costs the summary, not the run
        reason = f"the engine could not be built ({exc!r})"
        warn("engine", f"{reason}; the run is logged but not summarized")
        return None, reason


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


def load_observers(opts: Any, run_dir: Path | None, warn: Warn, stderr: Any = None) -> list[Any]:
    """The live views asked for (`views.observers.make_observers`), or none."""
    try:
        from trainmeter.views.observers import make_observers

        return list(make_observers(opts, run_dir, warn, stderr))
    except Exception as exc:  # noqa: BLE001 - a broken view costs the view, not the run
        warn("views", f"the live views are off: they did not load ({exc!r})")
        return []
