"""Watching the child while it runs: the live loop, and what its thread sets up late.

The live loop's thread loads the engine at once (`summary.json` needs it however short the
run), then, once the child has run a moment, the samplers and the silent-python watcher: a run
that is already over by then never pays for their imports (NVML, psutil), and they do not
compete with the child's own start-up for the CPU.
"""

from __future__ import annotations

TYPE_CHECKING = False  # what only annotations need: imported by type checkers, not by a run
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any, Protocol

    from ..runlog.observers import ObserverSet
    from ..runlog.recorder import Recorder
    from ..runlog.store import RunStore
    from .ingest import Ingest
    from .live import LiveLoop
    from .options import RunOptions

    class Watched(Protocol):
        """What watching reads of the session (`session.Session`), and the loop it sets."""

        recorder: Recorder | None
        ingest: Ingest | None
        store: RunStore | None
        opts: RunOptions
        interval: float
        observers: ObserverSet
        samplers_factory: Callable[[int, Path | None], list[Any]] | None
        watcher: Any
        child_env: dict[str, str] | None
        warn: Callable[[str, str], None]
        live: LiveLoop | None

        def attach_engine(self) -> None: ...

#: Seconds the child runs before the samplers and the watcher are set up (at most `interval`).
SAMPLERS_AFTER_S = 0.25


def _process_tree(pid: int) -> list[int]:
    """The child and its descendants now (`sources.host`, imported late: psutil)."""
    from ..sources.host import process_tree

    return process_tree(pid)


def start_watching(session: Watched, pid: int) -> None:
    """Start the live loop; its thread loads the engine, samplers and watcher itself."""
    from .live import LiveLoop

    ingest = session.ingest
    try:
        session.live = live = LiveLoop(
            session.recorder,
            session.warn,
            tree=lambda: _process_tree(pid),
            dropped=(lambda: ingest.dropped) if ingest is not None else None,
            drop_reasons=(lambda: ingest.drop_reasons) if ingest is not None else None,
            interval=session.interval,
            setup=lambda live: set_up_live(session, live, pid),
        )
        live.observers = session.observers
        live.start()
    except Exception as exc:  # noqa: BLE001 - watching is optional, the child is not
        session.warn("watch", f"live watching failed to start ({exc!r})")


def warm_views(observers: ObserverSet) -> None:
    """Let each view load what it needs at the end (`warm()`: the passport's modules) now, on
    this thread while the child runs, rather than on the way from the child's exit to tm's."""
    for view in observers.observers:
        warm = getattr(view, "warm", None)
        if warm is None:
            continue
        try:
            warm()
        except Exception:  # noqa: BLE001 - the end imports it again, and says so if it fails
            pass


def set_up_live(session: Watched, live: LiveLoop, pid: int) -> None:
    """In the live loop's thread: the engine, then (a moment in) the samplers and watcher."""
    session.attach_engine()  # needed for summary.json however short the run
    warm_views(session.observers)
    if live.pause(min(session.interval, SAMPLERS_AFTER_S)):
        return
    from pathlib import Path

    from . import late_parts as parts

    run_dir = (session.store.path if session.store else None) or Path.cwd()
    if session.samplers_factory is not None:
        live.samplers = list(session.samplers_factory(pid, run_dir))
    else:
        live.samplers = parts.load_samplers(pid, run_dir, session.opts.gpus, session.warn)
    if session.watcher is not None:
        live.watcher = session.watcher
    elif session.opts.agent:  # with --no-agent a Python without the agent is what was asked
        live.watcher = parts.load_watcher(session.warn, session.child_env)
