"""Why this process died, told to `tm` on the way out, without changing how it dies.

- An uncaught exception: `sys.excepthook` and `threading.excepthook` are chained, never
  replaced: ours sends one `crash` record (type, message, thread, the collective when the error
  came out of `torch.distributed`, the innermost frame of the user's code) and flushes it, then
  calls the hook that was there before, so the traceback printed and the exit status are the
  ones the process would have had without us (promise 1).
- A crash in native code (segfault, abort): `faulthandler`, when the user has not enabled it,
  writes every thread's Python stack into `fault.<pid>.<rank>` beside the ingest socket (the run
  directory does not exist yet when the process starts); `tm` moves a non-empty one into the
  run directory after the process ended. Without us nothing would be printed on a segfault, so
  stderr reads the same; the signal is re-raised by faulthandler, so the status is the same.
"""

from __future__ import annotations

import os
import sys

from ..payloads import CRASH
from ..records import ENV_SOCKET
from .sender import get_sender

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_MESSAGE = 4000
#: the torch module whose functions are the collectives
_C10D = ("distributed_c10d.py",)
_installed = False
_fault_file: Any = None


def _type_name(exc_type: Any) -> str:
    module = getattr(exc_type, "__module__", "") or ""
    name = getattr(exc_type, "__qualname__", None) or getattr(exc_type, "__name__", "?")
    return name if module in ("builtins", "") else f"{module}.{name}"


def _frames(tb: Any) -> tuple[str | None, str | None]:
    """(the innermost collective of torch.distributed, the innermost frame outside torch and
    the standard library as 'file:line in function') along the traceback."""
    collective = where = None
    prefixes = tuple(p for p in {sys.prefix, sys.base_prefix, sys.exec_prefix} if p)
    while tb is not None:
        code = tb.tb_frame.f_code
        name = code.co_filename
        if name.endswith(_C10D) and not code.co_name.startswith("_"):
            collective = code.co_name
        elif "site-packages" not in name and not name.startswith(prefixes) and "<frozen" not in name:
            where = f"{os.path.basename(name)}:{tb.tb_lineno} in {code.co_name}"
        tb = tb.tb_next
    return collective, where


def report(exc_type: Any, exc: Any, tb: Any, thread: str) -> None:
    """Send the `crash` record now (the process is about to end). Never raises."""
    try:
        sender = get_sender()
        if sender is None or exc_type is None or issubclass(exc_type, SystemExit):
            return
        try:
            message = str(exc)
        except Exception:  # noqa: BLE001 - an exception whose __str__ fails: its type alone
            message = ""
        collective, where = _frames(tb)
        d = CRASH.build(
            type=_type_name(exc_type),
            message=message[:MAX_MESSAGE],
            thread=thread,
            collective=collective or None,
            where=where or None,
        )
        sender.send(CRASH.name, d)
        sender.flush()
    except Exception:  # noqa: BLE001 - promise 1: reporting never changes how the process dies
        pass


def install() -> None:
    """Chain the exception hooks and enable faulthandler to a file. Once per process."""
    global _installed
    if _installed:
        return
    _installed = True
    previous = sys.excepthook

    def excepthook(exc_type: Any, exc: Any, tb: Any) -> None:
        report(exc_type, exc, tb, "MainThread")
        previous(exc_type, exc, tb)

    sys.excepthook = excepthook
    # threading's hook once threading is imported (a thread needs it first): importing it
    # here cost ~3 ms in every Python the run starts, most of which never start a thread
    from .importhook import when_imported

    when_imported("threading", _chain_thread_hook)
    enable_faulthandler()
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork)


def _chain_thread_hook(threading: Any) -> None:
    previous_thread = threading.excepthook

    def thread_excepthook(args: Any) -> None:
        thread = getattr(args.thread, "name", None) or "thread"
        report(args.exc_type, args.exc_value, args.exc_traceback, thread)
        previous_thread(args)

    threading.excepthook = thread_excepthook


def fault_path(pid: int | None = None) -> str | None:
    """`fault.<pid>.<rank>` beside the ingest socket (rank `x` when the process has none)."""
    socket_path = os.environ.get(ENV_SOCKET)
    if not socket_path:
        return None
    sender = get_sender()
    rank = sender.rank if sender is not None and sender.rank is not None else "x"
    return os.path.join(os.path.dirname(socket_path), f"fault.{pid or os.getpid()}.{rank}")


def enable_faulthandler() -> None:
    """Only when the user has not enabled it (PYTHONFAULTHANDLER, -X faulthandler)."""
    global _fault_file
    try:
        import faulthandler

        if faulthandler.is_enabled() and _fault_file is None:
            return  # the user's: their stderr keeps it
        path = fault_path()
        if path is None:
            return
        fh = open(path, "w", encoding="utf-8")  # noqa: SIM115 - held open for a crash to come
        faulthandler.enable(file=fh, all_threads=True)
        old, _fault_file = _fault_file, fh
        if old is not None:
            old.close()
    except Exception:  # noqa: BLE001 - no stacks on a native crash, the run goes on
        pass


def _after_fork() -> None:
    """A forked child (a DataLoader worker) writes its stacks to its own file."""
    if _fault_file is not None:
        enable_faulthandler()
