"""The corpus's runs, started as the session starts and made on the core the rest of the suite
leaves idle.

The corpus and lifecycle fixtures need some 200 s of CPU (29 programs under `tm` and plain, three
jobs whose processes exec and fork), all counts and bit-identical losses, nothing timed. The tests
before them in the suite (tests/agent, tests/cli) mostly run one process at a time, so on the
suite's 2-core box one core is about idle for their four minutes. `Queue` makes the runs there:
one worker as the session starts (this directory's conftest starts it once collection says a
test of the corpus will run); when a fixture needs its runs it widens the queue to the width the
fixture used to run at (two, three) and waits for its own jobs, which by then are mostly done.
Each run is the same process it was, started the same way; only when it starts changes.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent


class Queue:
    """Named jobs taken in the order given by worker threads: `width` of them at the start,
    more with `widen`; `result(name)` waits for one job and returns its value (or raises what
    it raised)."""

    def __init__(self, jobs: list[tuple[str, Callable[[], Any]]], width: int = 1) -> None:
        self._pending = list(jobs)
        self._done: dict[str, tuple[bool, Any]] = {}
        self._names = {name for name, _ in jobs}
        self._lock = threading.Condition()
        self._workers: list[threading.Thread] = []
        self._closed = False
        self.widen(width)

    def widen(self, width: int) -> None:
        """At least `width` workers from now on (never fewer than there are)."""
        with self._lock:
            while len(self._workers) < width and self._pending:
                worker = threading.Thread(target=self._work, name="tm-corpus", daemon=True)
                self._workers.append(worker)
                worker.start()

    def _work(self) -> None:
        while True:
            with self._lock:
                if self._closed or not self._pending:
                    return
                name, job = self._pending.pop(0)
            try:
                outcome = (True, job())
            except BaseException as exc:  # noqa: BLE001 - handed to whoever waits for it
                outcome = (False, exc)
            with self._lock:
                self._done[name] = outcome
                self._lock.notify_all()

    def result(self, name: str, width: int) -> Any:
        """The job's value once it is done, the queue widened to `width` while it waits."""
        assert name in self._names, f"{name} was never queued"
        self.widen(width)
        with self._lock:
            while name not in self._done:
                assert not self._closed, "the queue was closed"
                self._lock.wait(1.0)
            ok, value = self._done[name]
        if not ok:
            raise value
        return value

    def close(self) -> None:
        """No job starts any more; the ones running end as they end (the session's end)."""
        with self._lock:
            self._closed = True
            self._lock.notify_all()


class Runs:
    """The session's corpus and lifecycle runs: which were queued, where they are made."""

    def __init__(self, queue: Queue, corpus: list[str], lifecycle: list[str]) -> None:
        self.queue = queue
        self.corpus = corpus
        self.lifecycle = lifecycle


STARTED: list[Runs] = []


def _params(items: list[pytest.Item], module: str, param: str) -> list[str]:
    """The parameter values of the selected tests of one module of this directory."""
    out: list[str] = []
    for item in items:
        callspec = getattr(item, "callspec", None)
        if item.path.parent == HERE and item.path.name == module and callspec is not None:
            value = callspec.params.get(param)
            if value is not None and value not in out:
                out.append(value)
    return out


def start(session: pytest.Session) -> Runs:
    """Queue the runs the selected tests read (one worker), once a session; the runs."""
    if STARTED:
        return STARTED[0]
    corpus = _params(session.items, "test_corpus.py", "name")
    lifecycle = _params(session.items, "test_lifecycle.py", "job")
    if corpus or lifecycle:  # the modules were collected: torch is there
        from . import test_corpus

        only = os.environ.get("TM_CORPUS_ONLY")  # name,name: while working on a few programs
        corpus = [n for n in test_corpus.CASES if n in corpus and test_corpus._available(n)
                  and (not only or n in only.split(","))]
    factory: pytest.TempPathFactory = session.config._tmp_path_factory  # type: ignore[attr-defined]
    jobs: list[tuple[str, Callable[[], Any]]] = []
    if corpus:
        root = factory.mktemp("corpus")
        jobs.append(("plain", lambda: test_corpus._plain_done(*test_corpus._start_plain(corpus, root))))
        # the programs of a library first (the longest, 6-8 s of CPU under tm): the last runs
        # are short ones, so neither core waits long on the other at the end
        for name in sorted(corpus, key=lambda n: n not in test_corpus.NEEDS):
            jobs.append((f"tm:{name}", lambda n=name: test_corpus._run(n, root, ("tm",))))
    if lifecycle:
        life = factory.mktemp("lifecycle")
        for name in lifecycle:
            jobs.append((f"life:{name}", lambda n=name: test_corpus._run(n, life)))
    STARTED.append(Runs(Queue(jobs, width=1 if jobs else 0), corpus, lifecycle))
    return STARTED[0]


def stop() -> None:
    """No queued run starts after the session (those running end as they end)."""
    while STARTED:
        STARTED.pop().queue.close()
