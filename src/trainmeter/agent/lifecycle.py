"""A process that leaves without `atexit`, or is replaced by another program, keeps its record.

Two ways out skip the sender's exit flush (`Sender.flush_at_exit`, an `atexit` handler):

- `os._exit`, which every `multiprocessing` child calls when its target returns (fork,
  forkserver), and which scripts use to leave fast. What the ring holds is safe anyway (`tm`
  reads it after the process ends); what is held only in the process is not: values the ring
  had no room for (a full disk), a process with no ring at all, the steps of one without. So
  `os._exit` first does the exit flush, bounded like the one at a normal exit.
- `os.execv`/`os.execve` (and so every `os.exec*` function, which all end there): the same pid
  runs another program, and nothing of this one's runs again. Before the program is replaced,
  everything waiting is sent (bounded); what cannot go is counted in the ring's header, where
  `tm` reads it. The sender's lock is held through the exec so its thread cannot be cut off
  half way through a flush. The new program's agent sets this ring aside instead of
  overwriting it (`ring.set_aside`), and `tm` logs what it holds that the socket did not bring,
  before the new program's first record. An exec that fails gives everything back as it was.

`os.posix_spawn` and `subprocess` never replace the caller: their child is a new process with
its own ring. An exec done from C (not through `os`) skips the flush; the ring is still set
aside, so only what was held outside it is lost, uncounted.

Standard library only; installed once by `boot.start()` inside `tm`, inherited by forks.
"""

from __future__ import annotations

import os

from .sender import get_sender

TYPE_CHECKING = False  # typing costs ~9 ms at start-up in every Python the run starts
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

#: Seconds an exit or an exec waits for a busy receiver (as a normal exit does)
WAIT_S = 2.0

_installed = False


def install() -> None:
    """Wrap `os._exit`, `os.execv` and `os.execve` (and `posix`'s, the same functions)."""
    global _installed
    if _installed:
        return
    _installed = True
    import posix

    for module in (os, posix):
        for name, wrap in (("_exit", _exiting), ("execv", _replacing), ("execve", _replacing)):
            real = getattr(module, name, None)
            if real is not None and not hasattr(real, "__trainmeter_original__"):
                setattr(module, name, wrap(real))


def _exiting(real: Callable[[int], Any]) -> Callable[[int], Any]:
    def _exit(status: int) -> Any:
        try:
            sender = get_sender()
            if sender is not None and sender.pid == os.getpid():
                sender.flush_at_exit(WAIT_S)
        except BaseException:  # noqa: BLE001 - promise 1: the process leaves whatever happens
            pass
        return real(status)

    _exit.__trainmeter_original__ = real  # type: ignore[attr-defined]
    _exit.__doc__ = real.__doc__
    return _exit


def _replacing(real: Callable[..., Any]) -> Callable[..., Any]:
    def exec_(*args: Any, **kwargs: Any) -> Any:
        sender = None
        try:
            sender = get_sender()
            held = sender.before_exec(WAIT_S) if sender is not None else None
        except BaseException:  # noqa: BLE001 - promise 1: the exec goes ahead regardless
            held = None
        try:
            return real(*args, **kwargs)
        except BaseException:
            if held is not None and sender is not None:
                sender.exec_failed(held)  # the program goes on: as it was before
            raise

    exec_.__trainmeter_original__ = real  # type: ignore[attr-defined]
    exec_.__name__ = getattr(real, "__name__", "exec")
    exec_.__doc__ = real.__doc__
    return exec_
