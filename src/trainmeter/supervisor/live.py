"""The live loop: what `tm` records on its own while the training runs.

Every `interval` seconds it takes one sample from each sampler (GPU, process tree, node),
asks the silent-python watcher whether a Python in the tree runs without the agent, records the
ingest socket's drop count when it grows, appends each alert the engine newly raises, and
flushes the log (at least once a second: a crash loses at most that). Each part that fails is
switched off with one warning; the loop itself never stops the run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from .. import payloads
from ..runlog.live_checkpoint import LiveCheckpoints
from ..runlog.recorder import Recorder

Warn = Callable[[str, str], None]


class LiveLoop:
    """A daemon thread around `tick()`; `tick()` is public so tests can drive it directly."""

    def __init__(
        self,
        recorder: Recorder,
        warn: Warn,
        *,
        samplers: list[Any] | None = None,
        watcher: Any = None,
        tree: Callable[[], list[int]] | None = None,
        dropped: Callable[[], int] | None = None,
        drop_reasons: Callable[[], dict[str, int]] | None = None,
        interval: float = 1.0,
        setup: Callable[[LiveLoop], None] | None = None,
    ) -> None:
        self.recorder = recorder
        self.warn = warn
        self.samplers = list(samplers or [])
        self.watcher = watcher
        self.tree = tree or (lambda: [])
        self.dropped = dropped
        self.drop_reasons = drop_reasons
        self.interval = interval
        self.setup = setup
        self.ready = setup is None  # setup done: samplers and watcher in place
        self.ticks = 0
        self._reported_dropped = 0
        self._alerts_seen: set[tuple[Any, Any]] = set()
        self.observers: Any = None  # an `ObserverSet`: live views given each tick's snapshot
        self.checkpoints = LiveCheckpoints(recorder)  # the engine kept beside the log as it grows
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="trainmeter-live", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        if self.setup is not None:
            try:
                self.setup(self)  # imports and NVML start here, not on the way to wait()
            except Exception as exc:  # noqa: BLE001 - a failed setup leaves the run unwatched, never stopped
                self.warn("live:setup", f"live watching failed to start ({exc!r})")
            self.ready = True
            if self._stop.is_set():
                return
            self.tick()
        while not self._stop.wait(min(self.interval, 1.0)):
            self.tick()

    def pause(self, seconds: float) -> bool:
        """Wait up to `seconds`; True when the loop was stopped meanwhile (the run is over)."""
        return self._stop.wait(seconds)

    def stop(self, timeout: float = 10.0) -> bool:
        """Stop ticking; True when the thread ended within `timeout`.

        A thread still setting up (importing, starting NVML) when a short run ends is not waited
        for: it is a daemon, and the recorder is sealed after `run.end`, so nothing it does can
        reach the log. This keeps `tm`'s fixed cost off a short run.
        """
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout if self.ready else 0.0)
            return not self._thread.is_alive()
        return True

    # ---- one round ---------------------------------------------------------------------------

    def tick(self) -> None:
        self.ticks += 1
        for step in (self._sample, self._watch, self.record_dropped, self._alerts):
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - nothing here may stop the run
                self.warn(f"live:{step.__name__}", f"live loop: {step.__name__} failed: {exc!r}")
        self.recorder.flush()
        try:
            self.checkpoints.tick()
        except Exception as exc:  # noqa: BLE001 - a checkpoint costs the speed-up, never the run
            self.warn("live:checkpoint", f"live loop: the checkpoint failed: {exc!r}")

    def _sample(self) -> None:
        for sampler in list(self.samplers):
            kind = getattr(sampler, "kind", None)
            try:
                d = sampler.sample()
            except Exception as exc:  # noqa: BLE001 - the contract says never, but be sure
                self.samplers.remove(sampler)
                self.warn(f"sampler:{kind}", f"the {kind} sampler failed and is off: {exc!r}")
                continue
            if isinstance(d, dict) and kind in payloads.KINDS:
                self.recorder.write_tm(payloads.KINDS[kind], d)

    def _watch(self) -> None:
        if self.watcher is None:
            return
        try:
            facts = self.watcher.tick(self.tree(), self.recorder.hello_pid_set())
        except Exception as exc:  # noqa: BLE001 - the watcher failing costs only the watcher
            self.watcher = None
            self.warn("silent_pythons", f"the silent-python watcher failed and is off: {exc!r}")
            return
        for d in facts or []:
            if isinstance(d, dict) and isinstance(d.get("key"), str):
                self.recorder.write_tm(payloads.FACT, d)
                if d["key"] == "observe_only":  # said when found, not only in the log
                    self.warn(f"observe_only:{d.get('value')}", f"observe only: {d.get('value')}")

    def record_dropped(self) -> None:
        """The fact `ingest_dropped` each time the count of malformed lines has grown."""
        if self.dropped is None:
            return
        count = int(self.dropped())
        if count > self._reported_dropped:
            self._reported_dropped = count
            fact: dict[str, Any] = {
                "key": "ingest_dropped",
                "value": count,
                "source": "measured",
                "note": "lines at the ingest socket that were not records, or not plausible",
            }
            if self.drop_reasons is not None:
                fact["reasons"] = dict(self.drop_reasons())
            self.recorder.write_tm(payloads.FACT, fact)

    def _alerts(self) -> None:
        now = time.monotonic()
        snap = self.recorder.snapshot(now=now)
        if self.observers:
            self.observers.snapshot(snap, now)
        for alert in snap.get("alerts") or []:
            if not isinstance(alert, dict):
                continue
            key = (alert.get("kind"), alert.get("message"))
            if key in self._alerts_seen:
                continue
            self._alerts_seen.add(key)
            self.recorder.write_tm(payloads.ALERT, dict(alert))

    def close_samplers(self) -> None:
        for sampler in self.samplers:
            try:
                sampler.close()
            except Exception:  # noqa: BLE001 - closing at the end: nothing left to protect
                pass
