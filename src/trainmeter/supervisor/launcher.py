"""Starting the training command and waiting for it, with the terminal and signals intact.

- The child inherits stdin, stdout and stderr untouched (no pipes: progress bars, colours and
  `pdb` keep working) and stays in `tm`'s process group, so Ctrl-C (SIGINT to the foreground
  group) reaches it directly. `tm` catches SIGINT with a handler that does nothing, rather than
  SIG_IGN: a caught signal is reset to the default in the child by exec, an ignored one would be
  inherited and the child's Ctrl-C would stop working.
- SIGTERM, SIGHUP and SIGQUIT sent to `tm` are forwarded to the child (a job scheduler signals
  the process it started, which is `tm`), and `tm` never exits before the child does. So are
  SIGUSR1, SIGUSR2 and SIGALRM (Slurm's `--signal=USR1@T` warns a job this way, and Lightning's
  requeue listens for it) and SIGCONT; a signal whose default would kill `tm` never does.
- SIGINT, SIGWINCH and SIGTSTP are what a terminal sends to its whole foreground group, so the
  child has them already when `tm` is that group; sent to `tm` alone (no terminal, or `tm` in the
  background: `kill -INT <tm>`) they are forwarded. SIGTSTP then stops `tm` too, as it would
  have without a handler. (Signal info is not available to a Python handler, so `kill -INT` at
  a `tm` in the foreground of a terminal is taken for Ctrl-C and not forwarded.)
- The exit status is the child's, 128+N when a signal N killed it (promise 9); a command that
  cannot be started is 127 (not found) or 126 (not executable), as a shell says.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections import namedtuple
from collections.abc import Iterator

from ..records import ENV_NO_TAP, ENV_SOCKET

FORWARDED = tuple(
    getattr(signal, name)
    for name in ("SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGCONT")
    if hasattr(signal, name)
)
#: Signals a terminal sends to its foreground group: forwarded only when `tm` is not that group.
FROM_TERMINAL = tuple(
    getattr(signal, name) for name in ("SIGWINCH", "SIGTSTP") if hasattr(signal, name)
)


def terminal_sends_to_us() -> bool:
    """Whether `tm` is the foreground process group of its terminal: then what the terminal
    sends (Ctrl-C, Ctrl-Z, a resize) reaches the child directly, and must not twice."""
    for fd in (0, 1, 2):
        try:
            if os.isatty(fd):
                return os.tcgetpgrp(fd) == os.getpgrp()
        except OSError:
            continue
    return False
BOOTSTRAP_DIR = "agent/bootstrap"


class LaunchError(Exception):
    """The command could not be started. `status` is what `tm` exits with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


#: How the child ended: `status` is what `tm` returns, `signal` the signal that killed the
#: child if one did, else None. (A plain namedtuple: typing's import is start-up cost.)
ChildExit = namedtuple("ChildExit", ["status", "signal"])


def bootstrap_path() -> str:
    """Where the agent's sitecustomize lives, in the installed package."""
    import trainmeter

    return os.path.join(os.path.dirname(os.path.realpath(trainmeter.__file__)), BOOTSTRAP_DIR)


def child_env(
    base: dict[str, str] | os._Environ,
    socket_path: str | None,
    *,
    agent: bool = True,
    tap: bool = True,
) -> dict[str, str]:
    """The training command's environment: the user's, plus how to reach `tm`."""
    env = dict(base)
    if socket_path is not None:
        env[ENV_SOCKET] = socket_path
    if agent and socket_path is not None:
        old = env.get("PYTHONPATH")
        env["PYTHONPATH"] = bootstrap_path() + (os.pathsep + old if old else "")
    if not tap:
        env[ENV_NO_TAP] = "1"
    return env


def exit_status(returncode: int) -> ChildExit:
    """Popen's returncode as a shell reports it: -N (killed by signal N) becomes 128+N."""
    if returncode < 0:
        return ChildExit(128 - returncode, -returncode)
    return ChildExit(returncode, None)


def check_script(command: list[str], script: str | None) -> None:
    """`tm train.py` for a train.py that is not there: say so now, as a shell would (127)."""
    if script is not None and script != "-" and not os.path.exists(script):
        raise LaunchError(127, f"tm: {script}: no such file")


def _which(program: str, path: str | None) -> str | None:
    import shutil  # here: `tm train.py` never needs it, and every run's start-up would pay it

    return shutil.which(program, path=path)


def check_command(command: list[str], script: str | None, path: str | None = None) -> None:
    """Refuse, before anything is created, a command that cannot start: 127 when it is not
    there (no such script, no such program on PATH), 126 when it is not executable. So a typo
    leaves no run directory behind, only the shell's one line."""
    check_script(command, script)
    program = command[0]
    if os.sep in program:
        if not os.path.exists(program):
            raise LaunchError(127, f"tm: {program}: no such file")
        if os.path.isdir(program) or not os.access(program, os.X_OK):
            raise LaunchError(126, f"tm: {program}: permission denied")
    elif _which(program, path) is None:
        raise LaunchError(127, f"tm: {program}: command not found")


class Launcher:
    """Runs one command. Use `with launcher.signals():` around `start()` and `wait()`."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.command = command
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self._pending: list[int] = []
        self.forwarded: list[int] = []
        #: what `signals(ignore_after=...)` left ignored, and what to put back when the caller
        #: is done (the dispositions before the child started)
        self.put_back: dict[int, object] = {}

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def _on_forwarded(self, signum: int, _frame: object) -> None:
        proc = self.proc
        if proc is None or proc.returncode is not None:
            self._pending.append(signum)
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signum)
        self.forwarded.append(signum)

    def _on_interrupt(self, signum: int, frame: object) -> None:
        """Ctrl-C went to the whole foreground group: the child has it; `tm` waits for it.
        Not from a terminal (`kill -INT <tm>`): the child has not, so it is forwarded."""
        if not terminal_sends_to_us():
            self._on_forwarded(signum, frame)

    def _on_resize(self, signum: int, frame: object) -> None:
        if not terminal_sends_to_us():
            self._on_forwarded(signum, frame)

    def _on_stop(self, signum: int, frame: object) -> None:
        """SIGTSTP sent to `tm` alone: to the child, then stop here as without a handler."""
        if not terminal_sends_to_us():
            self._on_forwarded(signum, frame)
        try:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            signal.signal(signum, self._on_stop)  # continued
        except (OSError, ValueError):
            pass

    @contextlib.contextmanager
    def signals(self, ignore_after: tuple[int, ...] = ()) -> Iterator[None]:
        """Install the handlers for the child's lifetime, then put back what was there.

        The signals in `ignore_after` are left ignored instead, and what was there before is
        kept in `put_back` for the caller: put back first and ignored by the caller after, a
        SIGTERM or SIGUSR1 arriving in between met its default action and killed `tm` after
        the child had ended (its status lost).
        """
        previous: dict[int, object] = {}
        try:
            for signum in (signal.SIGINT, *FORWARDED, *FROM_TERMINAL):
                if signal.getsignal(signum) is signal.SIG_IGN:
                    continue  # `nohup tm ...`, `tm ... &`: the child inherits the ignore, as usual
                if signum == getattr(signal, "SIGTSTP", None):
                    if terminal_sends_to_us():
                        continue  # Ctrl-Z stops the group; the live status line handles it
                    handler = self._on_stop
                elif signum == signal.SIGINT:
                    handler = self._on_interrupt
                elif signum in FROM_TERMINAL:
                    handler = self._on_resize
                else:
                    handler = self._on_forwarded
                previous[signum] = signal.signal(signum, handler)
        except ValueError:  # not the main thread: leave signals alone
            pass
        try:
            yield
        finally:
            for signum, handler in previous.items():
                if signum in ignore_after:
                    self.put_back[signum] = handler
                    handler = signal.SIG_IGN
                with contextlib.suppress(ValueError, TypeError):
                    signal.signal(signum, handler)  # type: ignore[arg-type]

    def start(self) -> int:
        """Start the command; raise `LaunchError` when it cannot be started. Returns its pid."""
        try:
            self.proc = subprocess.Popen(self.command, env=self.env)
        except FileNotFoundError:
            raise LaunchError(127, f"tm: {self.command[0]}: command not found") from None
        except PermissionError:
            raise LaunchError(126, f"tm: {self.command[0]}: permission denied") from None
        except OSError as exc:
            raise LaunchError(126, f"tm: {self.command[0]}: cannot run ({exc.strerror})") from None
        for signum in self._pending:  # a SIGTERM that came while we were starting it
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signum)
            self.forwarded.append(signum)
        self._pending.clear()
        return self.proc.pid

    def wait(self) -> ChildExit:
        """Wait for the child however many signals arrive meanwhile (PEP 475 retries)."""
        assert self.proc is not None
        while True:
            try:
                return exit_status(self.proc.wait())
            except KeyboardInterrupt:  # only if someone restored Python's default handler
                continue
