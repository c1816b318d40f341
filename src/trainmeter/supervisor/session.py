"""One supervised run, start to end: the order of things is the contract.

1. The ingest socket, then the child at once: what `tm` does before the child starts adds to
   every run's start-up, so only the socket and the launcher are imported before it (each may
   fail: the training still runs, promise 9).
2. While the child boots: the run directory, `run.start` and the declared facts, first in the
   log; only then does the ingest thread read the socket (the agent's first datagrams wait in
   the socket's queue, or in the agent's backlog, meanwhile).
3. The live loop; its thread loads the engine, then the samplers and the watcher.
4. Live loop until the child exits; then a short grace period for the agents' last datagrams.
5. `ingest_dropped` if lines were dropped, `run.end` last; flush and close the log.
6. `summary.json` from the engine that was fed exactly the logged records, then the summary line.

The modules only steps 2-6 need are imported where they are used, after the child started.
The session holds the order and the run's pieces; each step's work is in a module of its own:
`about` (what `run.start` and `meta.json` say), `descriptors` (those held back for the end),
`watching` (the live loop and its late set-up), `ending` (everything after the child's exit)
and `observe_only` (why no agent reported, judged at the end).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable

from ..payloads import FACT, RUN_START
from ..runlog.observers import ObserverSet
from ..runlog.warn import WarnOnce
from .descriptors import Reserve
from .ingest import Ingest
from .launcher import (
    FORWARDED,
    ChildExit,
    Launcher,
    LaunchError,
    check_command,
    check_script,
    child_env,
)
from .options import RunOptions

TYPE_CHECKING = False  # what only annotations need: imported by type checkers, not by a run
if TYPE_CHECKING:
    from datetime import datetime
    from pathlib import Path
    from typing import Any

    from ..runlog.recorder import Recorder
    from ..runlog.store import RunStore
    from .live import LiveLoop
    from .ring import Delivered


def _unread(line: bytes, record: dict[str, Any]) -> None:
    """The ingest socket's sink until `prepare` gives it the recorder (nothing is read before)."""


class Session:
    """Holds the pieces of one run so each step can be guarded on its own."""

    def __init__(
        self,
        opts: RunOptions,
        *,
        engine_factory: Callable[[], Any] | None = None,
        samplers_factory: Callable[[int, Path | None], list[Any]] | None = None,
        watcher: Any = None,
        interval: float = 1.0,
        grace_s: float = 0.3,
        root: Path | None = None,
        stderr=None,
        make_observers: Callable[..., list[Any]] | None = None,
        end_line: Callable[[dict[str, Any], Path | None, float | None], str] | None = None,
    ) -> None:
        self.opts = opts
        self.make_observers = make_observers  # (opts, run_dir, warn, stderr) -> the live views
        self.end_line = end_line  # (final snapshot, run dir, elapsed s) -> the line at the end
        self.warn = WarnOnce(stderr)
        self.stderr = stderr
        self.engine_factory = engine_factory
        self.samplers_factory = samplers_factory
        self.watcher = watcher
        self.interval = interval
        self.grace_s = grace_s
        self.root = root
        self.name = opts.default_name
        self.store: RunStore | None = None
        self.recorder: Recorder | None = None
        self.ingest: Ingest | None = None
        self.ingest_error: str | None = None  # why there is no socket, for the observe-only fact
        self.reserve = Reserve()  # descriptors held back for the end of the run
        self.live: LiveLoop | None = None
        self.t0 = time.monotonic()
        self.started_unix = time.time()
        self.started_utc: datetime | None = None  # set in `prepare` (datetime is imported there)
        self.final: dict[str, Any] | None = None
        self.elapsed_s: float | None = None
        self.child_env: dict[str, str] | None = None
        self.observers = ObserverSet([], self.warn)
        self.launched = False  # the command started (a LaunchError leaves nothing to explain)
        self.delivered: Delivered | None = None  # what the socket brought (to read the rings)
        self.forwarded: list[int] = []  # signals tm passed on to the child (from outside)
        #: dispositions to put back once tm is done: the child's signals stay ignored from its
        #: end until then (see `Launcher.signals`)
        self.signals_put_back: dict[int, Any] = {}
        self.oom_before: dict[str, Any] | None = None  # the OOM-kill count as the run began

    # ---- 1 ----------------------------------------------------------------------------------

    def open_socket(self) -> dict[str, str]:
        """The ingest socket, bound but not yet read (`prepare` starts its thread). Returns the
        child's environment: without the socket, and so without the agent, when it failed."""
        try:
            self.ingest = Ingest(_unread)
        except OSError as exc:
            self.ingest_error = exc.strerror or str(exc)
            self.warn("ingest", f"no ingest socket ({exc}); the agent cannot report")
        return child_env(
            os.environ,
            self.ingest.path if self.ingest else None,
            agent=self.opts.agent,
            tap=self.opts.tap,
        )

    # ---- 2 ----------------------------------------------------------------------------------

    def prepare(self) -> None:
        """Run directory, recorder, observers, the first records; then the ingest thread."""
        from datetime import datetime, timezone

        from ..runlog.recorder import Recorder
        from ..runlog.store import RunStore
        from . import late_parts as parts
        from . import ring
        from .about import meta, start_payload
        from .death import oom_kills

        self.reserve.hold()
        self.started_utc = datetime.fromtimestamp(self.started_unix, timezone.utc)
        self.oom_before = oom_kills()
        self.delivered = ring.Delivered()
        self.store = RunStore.create(self.name, self.warn, root=self.root, when=self.started_utc)
        self.recorder = Recorder(self.store, self.warn)
        self.observers = ObserverSet(
            parts.load_observers(
                self.make_observers, self.opts, self.store.path, self.warn, self.stderr
            ),
            self.warn,
        )
        self.recorder.observers = self.observers
        recorder = self.recorder
        for view in self.observers.observers:
            if hasattr(view, "log_fact"):  # a view that counts its failures in the log (--notify)
                view.log_fact = lambda d: recorder.write_tm(FACT, d)
        self.store.write_json("meta.json", meta(self.about(), self.started_utc))
        self.recorder.write_tm(RUN_START, start_payload(self.about(), self.opts), t=self.t0)
        if self.ingest is not None:  # a step from before it cannot be true (forged, or a bug)
            self.ingest.decoder.t_start = self.t0
        for key, value in self.opts.declared.items():
            note = self.opts.notes.get(key)
            fact = {"key": key, "value": value, "source": "declared", "note": note}
            self.recorder.write_tm(FACT, fact)
        self.recorder.flush()
        if self.ingest is not None:
            ingest, delivered, accept = self.ingest, self.delivered, self.recorder.accept
            delivered.on_new_image = lambda pid: ingest.recover_images(pid, delivered, accept)
            self.ingest.sink = delivered.wrap(accept)
            self.ingest.start()

    def _prepare_or_unwatch(self) -> bool:
        """`prepare`, or when it fails, a warning and a closed socket (the agent then hears
        that nobody listens); the command runs on unwatched either way."""
        try:
            self.prepare()
            return True
        except Exception as exc:  # noqa: BLE001 - the training runs even when tm's setup fails
            self.warn("prepare", f"setup failed ({exc!r}); the command runs unwatched")
            if self.ingest is not None:
                self.ingest.stop()
                self.ingest = None
            return False

    def about(self) -> dict[str, Any]:
        """What both `run.start` and `meta.json` say about the run (`about.about`)."""
        from .about import about

        return about(self.name, self.opts, self.store)

    # ---- 3 and 4 ----------------------------------------------------------------------------

    def run_child(self, env: dict[str, str]) -> ChildExit:
        """Start the command, then prepare the rest while it boots; watch it and wait."""
        self.child_env = env
        launcher = Launcher(self.opts.command, env)
        self.signals_put_back = launcher.put_back  # filled as the `with` below ends
        with launcher.signals(ignore_after=(signal.SIGINT, *FORWARDED)):
            try:
                check_script(self.opts.command, self.opts.script)
                pid = launcher.start()
            except LaunchError as exc:
                self.say(exc.message)
                if self._prepare_or_unwatch():
                    self.attach_engine()
                return ChildExit(exc.status, None)
            self.launched = True
            if self._prepare_or_unwatch():
                from .watching import start_watching

                start_watching(self, pid)
            child = launcher.wait()
        self.forwarded = list(launcher.forwarded)
        return child

    def attach_engine(self) -> None:
        """The engine, fed what the log holds so far (once; `runlog.engine_load` loads it)."""
        if self.recorder is None or self.recorder.engine_attached:
            return
        from ..runlog.engine_load import load_engine_factory, make_engine

        factory, missing = (
            (self.engine_factory, None)
            if self.engine_factory is not None
            else load_engine_factory(self.warn)
        )
        engine, reason = make_engine(factory, self.warn)
        self.recorder.attach_engine(engine, missing or reason)

    # ---- 5 and 6 ----------------------------------------------------------------------------

    def finish(self, child: ChildExit) -> None:
        """Everything after the child's exit, in its order (`ending.finish`)."""
        from .ending import finish

        finish(self, child)

    def summary_line(self) -> str | None:
        """The caller's end line (`cli/run.py` passes the terminal view's), or none."""
        if self.end_line is None:
            return None
        run_dir = self.store.path if self.store and not self.store.broken else None
        return self.end_line(self.final or {}, run_dir, self.elapsed_s)

    def say(self, line: str) -> None:
        try:
            stream = self.stderr or sys.stderr
            stream.write(line + "\n")  # one write: the training's output cannot split the line
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed stderr must not change the exit status
            pass


def supervise(opts: RunOptions, **kwargs: Any) -> int:
    """Run `opts.command` under `tm`. Returns the child's exit status whatever else fails."""
    try:
        check_command(opts.command, opts.script)
    except LaunchError as exc:
        print(exc.message, file=kwargs.get("stderr") or sys.stderr, flush=True)
        return exc.status
    session = Session(opts, **kwargs)
    env: dict[str, str] | None = None
    try:
        env = session.open_socket()
    except Exception as exc:  # noqa: BLE001 - the training runs even when tm's setup fails
        session.warn("prepare", f"setup failed ({exc!r}); running the command unwatched")
    if env is None:
        env = child_env(os.environ, None, agent=False)
    try:
        child = session.run_child(env)
    except BaseException:
        for signum, handler in session.signals_put_back.items():  # left ignored for finish()
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(signum, handler)
        raise
    # The child is gone. A second Ctrl-C, or a scheduler's SIGTERM/SIGHUP/SIGQUIT, while the log
    # is closed must not turn its status into 1 or 128+N: those are ignored until tm returns.
    # (`run_child` left the ones it handled ignored already, with no gap after the child's end,
    # and says what was there before it.)
    previous: dict[int, Any] = {}
    for signum in (signal.SIGINT, *FORWARDED):
        try:
            was = signal.signal(signum, signal.SIG_IGN)
        except ValueError:  # not the main thread
            break
        previous[signum] = session.signals_put_back.get(signum, was)
    try:
        if session.recorder is not None:  # else the setup failed, and said so: nothing to sum up
            session.finish(child)
            line = None if opts.quiet else session.summary_line()
            if line is not None:
                session.say(line)
    except Exception as exc:  # noqa: BLE001 - promise 9: the status is the child's
        session.warn("finish", f"the run summary failed ({exc!r})")
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return child.status
