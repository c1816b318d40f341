"""Observers: the views that watch a live run (dashboard, terminal status, metrics export).

The supervisor knows nothing of how a number is shown. It hands each observer three things:
the loop's values as the engine took them (`on_points(points, origin)`: the engine is the one
reader of metric and step records, with one rank rule; called under the recorder's lock, so it
must be cheap: append to a bounded history, no I/O), a fresh snapshot about once a second
(`on_snapshot`, from the live loop's thread) and the final snapshot after `run.end`
(`on_finish`). A view that
fails is switched off with one warning; nothing a view does can stop or change the run.

Views register themselves in `trainmeter.views.observers.make_observers(...)`, imported late.
"""

from __future__ import annotations

from collections.abc import Callable

TYPE_CHECKING = False  # typing costs milliseconds before the child starts (session imports us)
if TYPE_CHECKING:
    from typing import Any, Protocol

    class Observer(Protocol):
        """What a live view implements. All methods are optional in practice (`ObserverSet`
        checks)."""

        name: str
        #: the top-level snapshot keys `on_snapshot` reads (optional: without it, every key)
        reads: frozenset[str]

        def on_points(self, points: list[tuple[Any, ...]], origin: float | None) -> None: ...

        def on_snapshot(self, snap: dict[str, Any], now: float) -> None: ...

        def on_finish(self, snap: dict[str, Any]) -> None: ...


Warn = Callable[[str, str], None]


class ObserverSet:
    """Calls each observer behind a guard; one that raises is dropped with one warning."""

    def __init__(self, observers: list[Any], warn: Warn) -> None:
        self.observers = list(observers)
        self.warn = warn
        #: `reads()`'s answer, and the list and length it was worked out for (a replay asks at
        #: each of its ~2,000 samples; the union copied every key each time)
        self._reads: tuple[frozenset[str] | None, list[Any], int] | None = None

    def __bool__(self) -> bool:
        return bool(self.observers)

    def _call(self, method: str, *args: Any) -> None:
        for obs in list(self.observers):
            fn = getattr(obs, method, None)
            if fn is None:
                continue
            try:
                fn(*args)
            except Exception as exc:  # noqa: BLE001 - a view never stops the run
                self.drop(obs, exc)

    def drop(self, obs: Any, exc: BaseException) -> None:
        """Switch off a view that raised, with one warning."""
        name = getattr(obs, "name", type(obs).__name__)
        if obs in self.observers:
            self.observers.remove(obs)
        self._reads = None
        self.warn(f"view:{name}", f"the {name} view failed and is off: {exc!r}")

    def points(self, points: list[tuple[Any, ...]], origin: float | None) -> None:
        """`on_points`: the engine's points (`Engine.take_points`: key, step, value, seconds
        since the run's start, tokens) and the run's start in record time."""
        self._call("on_points", points, origin)

    def snapshot(self, snap: dict[str, Any], now: float) -> None:
        self._call("on_snapshot", snap, now)

    def reads(self) -> frozenset[str] | None:
        """The snapshot keys the observers read (their `reads`, together), or None when one
        of them does not say (it is given every key): a replay's samples compose only those.
        Worked out again only when the observers may have changed (one dropped, the list
        replaced or of another length): an observer's `reads` is fixed."""
        memo, observers = self._reads, self.observers
        if memo is not None and memo[1] is observers and memo[2] == len(observers):
            return memo[0]
        keys: frozenset[str] | None = frozenset()
        for obs in observers:
            got = getattr(obs, "reads", None)
            if not isinstance(got, frozenset):
                keys = None
                break
            keys = keys | got  # type: ignore[operator]
        self._reads = (keys, observers, len(observers))
        return keys

    def finish(self, snap: dict[str, Any]) -> None:
        self._call("on_finish", snap)
