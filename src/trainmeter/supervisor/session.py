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
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import time
from collections.abc import Callable

from .. import __version__, records
from ..runlog.observers import ObserverSet
from ..runlog.warn import WarnOnce
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

#: A finished run's log shorter than this replays in a blink: `tm` leaves it no checkpoint.
LIVE_CHECKPOINT_FROM = 1 << 20

TYPE_CHECKING = False  # what only annotations need: imported by type checkers, not by a run
if TYPE_CHECKING:
    from datetime import datetime
    from pathlib import Path
    from typing import Any

    from ..runlog.recorder import Recorder
    from ..runlog.store import RunStore
    from .live import LiveLoop
    from .ring import Delivered

#: Seconds the child runs before the samplers and the watcher are set up (at most `interval`).
SAMPLERS_AFTER_S = 0.25


#: Descriptors `tm` holds back from the start for the end of the run (rings, summary, meta).
RESERVED_FDS = 16


def _process_tree(pid: int) -> list[int]:
    """The child and its descendants now (`sources.host`, imported late: psutil)."""
    from ..sources.host import process_tree

    return process_tree(pid)


def _unread(line: bytes, record: dict[str, Any]) -> None:
    """The ingest socket's sink until `prepare` gives it the recorder (nothing is read before)."""


def node_uptime_s() -> float | None:
    """Seconds since the node booted: how long the rented machine has been paid for."""
    try:
        with open("/proc/uptime", encoding="ascii") as fh:
            return float(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    try:
        import psutil

        return max(time.time() - psutil.boot_time(), 0.0)
    except Exception:  # noqa: BLE001 - psutil absent or refused: uptime stays unknown
        return None


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
        self._reserve: list[int] = []  # descriptors held back for the end of the run
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
        from .death import oom_kills

        self._reserve_descriptors()
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
                view.log_fact = lambda d: recorder.write_tm("fact", d)
        self.store.write_json("meta.json", self.meta())
        self.recorder.write_tm("run.start", self.start_payload(), t=self.t0)
        if self.ingest is not None:  # a step from before it cannot be true (forged, or a bug)
            self.ingest.decoder.t_start = self.t0
        for key, value in self.opts.declared.items():
            fact = {"key": key, "value": value, "source": "declared"}
            if key in self.opts.notes:
                fact["note"] = self.opts.notes[key]
            self.recorder.write_tm("fact", fact)
        self.recorder.flush()
        if self.ingest is not None:
            self.ingest.sink = self.delivered.wrap(self.recorder.accept)
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

    def _about(self) -> dict[str, Any]:
        """What both `run.start` and `meta.json` say about the run."""
        return {
            "name": self.name,
            "argv": records.redact_argv(self.opts.command),
            "tm_version": __version__,
            "hostname": socket.gethostname(),
            "python": sys.version.split()[0],  # platform.python_version(), without its import
            "run_dir": str(self.store.path) if self.store and self.store.path else None,
            "declared": dict(self.opts.declared),
            "declared_notes": dict(self.opts.notes),
        }

    def start_payload(self) -> dict[str, Any]:
        from . import job

        return {
            **self._about(),
            "node_uptime_s": node_uptime_s(),
            "unix_time": time.time(),
            "clock": job.clock_pair(),
            "job": job.identity(self.opts.run_id, self.opts.command, os.environ),
            "agent": self.opts.agent,
            "tap": self.opts.tap,
        }

    def meta(self, end: dict[str, Any] | None = None) -> dict[str, Any]:
        meta = {
            **self._about(),
            "start_utc": self.started_utc.isoformat(timespec="seconds"),  # set by `prepare`
            "executable": sys.executable,
        }
        if end:
            meta.update(end)
        return meta

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
                    self._attach_engine()
                return ChildExit(exc.status, None)
            self.launched = True
            if self._prepare_or_unwatch():
                self._start_watching(pid)
            child = launcher.wait()
        self.forwarded = list(launcher.forwarded)
        return child

    def _attach_engine(self) -> None:
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

    def _start_watching(self, pid: int) -> None:
        """Start the live loop; its thread loads the engine, samplers and watcher itself."""
        from .live import LiveLoop

        ingest = self.ingest
        try:
            self.live = live = LiveLoop(
                self.recorder,
                self.warn,
                tree=lambda: _process_tree(pid),
                dropped=(lambda: ingest.dropped) if ingest is not None else None,
                drop_reasons=(lambda: ingest.drop_reasons) if ingest is not None else None,
                interval=self.interval,
                setup=lambda live: self._set_up_live(live, pid),
            )
            live.observers = self.observers
            live.start()
        except Exception as exc:  # noqa: BLE001 - watching is optional, the child is not
            self.warn("watch", f"live watching failed to start ({exc!r})")

    def _set_up_live(self, live: LiveLoop, pid: int) -> None:
        self._attach_engine()  # needed for summary.json however short the run
        # Samplers and the watcher (imports, NVML) only once the child has run a moment: a
        # run that is already over by then never pays for them, and they do not compete with
        # the child's own start-up for the CPU.
        if live.pause(min(self.interval, SAMPLERS_AFTER_S)):
            return
        from pathlib import Path

        from . import late_parts as parts

        run_dir = (self.store.path if self.store else None) or Path.cwd()
        if self.samplers_factory is not None:
            live.samplers = list(self.samplers_factory(pid, run_dir))
        else:
            live.samplers = parts.load_samplers(pid, run_dir, self.opts.gpus, self.warn)
        if self.watcher is not None:
            live.watcher = self.watcher
        elif self.opts.agent:  # with --no-agent a Python without the agent is what was asked
            live.watcher = parts.load_watcher(self.warn, self.child_env)

    # ---- 5 and 6 ----------------------------------------------------------------------------

    def _agents_alive(self) -> bool:
        """Whether a process that said hello still runs (and so may still send)."""
        for pid in self.recorder.hello_pid_set():
            try:
                os.kill(pid, 0)  # signal 0: a liveness check, nothing is delivered
            except ProcessLookupError:
                continue
            except OSError:
                return True  # exists, not ours to signal
            return True
        return False

    def finish(self, child: ChildExit) -> None:
        from datetime import datetime, timezone

        from ..runlog.decode import log_summary
        from . import death, ring
        from .live import LiveLoop

        if self.live is not None:
            self.live.stop(timeout=0.1)
        self._release_reserve()  # what follows must not fail for want of a descriptor
        if self.ingest is not None:
            self.ingest.settle(max_s=self.grace_s, agents_alive=self._agents_alive)
            rings = self.ingest.ring_maps()  # before stop() removes the directory
            faults = death.collect_faults(self.ingest.dir, self.store.path if self.store else None)
            self.ingest.stop()
            ring.recover(rings, self.delivered, self.recorder.accept)  # what a death kept back
            for fault in faults:  # a native crash: where faulthandler's stacks now are
                self.recorder.write_tm("crash", fault)
            if self.ingest.rings_unread:  # what the socket did not bring from them is lost
                self.recorder.write_tm("fact", {
                    "key": "agent_rings_unread", "value": self.ingest.rings_unread,
                    "source": "detected",
                    "note": "ring files tm could not open at the end (out of descriptors?): "
                    "steps and values they held and the socket did not deliver are not counted",
                })
        if self.live is not None:
            self.live.record_dropped()
            self.live.close_samplers()
        elif self.ingest is not None and self.ingest.dropped:
            LiveLoop(
                self.recorder,
                self.warn,
                dropped=lambda: self.ingest.dropped,
                drop_reasons=lambda: self.ingest.drop_reasons,
            ).record_dropped()
        self._explain_observe_only()
        elapsed = time.monotonic() - self.t0
        self.elapsed_s = elapsed
        end = {"exit_status": child.status, "signal": child.signal, "elapsed_s": elapsed}
        if child.signal is not None and child.signal in self.forwarded:
            end["signal_from"] = "outside"  # sent to tm (a scheduler, a person) and passed on
        oom = death.oom_delta(self.oom_before, death.oom_kills())
        if oom is not None:
            end["oom_kills"] = oom["kills"]
            end["oom_source"] = oom["source"]
        self.recorder.write_tm("run.end", end)
        self.recorder.seal()
        self.recorder.close()
        self._attach_engine()
        self.final = self.recorder.snapshot(now=None)
        self.final["log"] = log_summary(self.recorder.written, self.recorder.written, {})
        self.store.write_json("summary.json", self.final)
        died = self.final.get("death")
        if isinstance(died, dict) and died.get("text"):
            end["cause"] = died["text"]  # `tm runs` reads it from meta.json
        if self.store.path is not None and self.store.broken is None:
            self._save_checkpoint(self.store.path / "events.jsonl")
        self.observers.finish(self.final)
        self.store.write_json(
            "meta.json",
            self.meta({"end_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"), **end}),
        )

    def _reserve_descriptors(self) -> None:
        """Hold a few descriptors from the start (on /dev/null, never inherited), to give back
        at the end: a run that used up the limit (idle dashboard clients, the user's own files)
        still has what mapping the rings and writing the summary need."""
        try:
            self._reserve = [os.open(os.devnull, os.O_RDONLY) for _ in range(RESERVED_FDS)]
        except OSError:
            pass

    def _release_reserve(self) -> None:
        for fd in self._reserve:
            try:
                os.close(fd)
            except OSError:
                pass
        self._reserve = []

    def _save_checkpoint(self, events: Path) -> None:
        """A long run's engine, kept beside its log: the next look at the run is at once.
        A short log replays in a blink: no checkpoint, and nothing imported for one."""
        try:
            if os.stat(events).st_size < LIVE_CHECKPOINT_FROM:
                return
        except OSError:
            return
        from ..runlog.replay import save_finished

        save_finished(events, self.recorder)

    def _explain_observe_only(self) -> None:
        """No process said hello: record why (once), and say it on stderr, however short the run.

        The live watcher gives a Python a couple of seconds before it judges it, so a short run
        ends unexplained; this judges from the command itself when the run is over.
        """
        recorder = self.recorder
        if recorder is None or not self.launched or recorder.hello_pid_set():
            return
        if not self.opts.agent:
            reason, source = "tm --no-agent: the agent was not loaded, as asked", "declared"
        elif self.ingest is None:
            reason = "tm could not open its socket, so the agent had nowhere to report"
            if self.ingest_error:
                reason += f" ({self.ingest_error})"
            source = "detected"
        elif recorder.observe_only:
            reason, source = "", ""
        else:
            from .agentless import reason_without_hello

            env = self.child_env if self.child_env is not None else dict(os.environ)
            reason, source = reason_without_hello(self.opts.command, env), "detected"
        if reason:
            note = "judged when the run ended: no process of the run said hello"
            recorder.write_tm(
                "fact", {"key": "observe_only", "value": reason, "source": source, "note": note}
            )
        if self.opts.agent:
            for said in recorder.observe_only:
                self.warn(f"observe_only:{said}", f"observe only: {said}")

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
