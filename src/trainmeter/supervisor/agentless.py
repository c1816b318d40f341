"""Which Pythons of the run carry no agent, and why: the `observe_only` facts.

When a Python in the training tree never says `hello`, `tm` still sees the GPUs and the host,
but no steps, tokens or loss. A dashboard that just shows blanks leaves the user guessing; this
watcher finds the reason and records it once, as a `detected` fact, so the summary can say
"observe only: python started with -I" instead of nothing. The supervisor calls `tick` about once
a second with the training process tree and the pids that said hello.

The reasons, in the order they are checked (the first that holds is the one reported):

- the command is not a Python program at all (a shell script with no Python under it, a binary);
- the interpreter was started with -I, -S or -E (its command line), which skip PYTHONPATH or
  `sitecustomize`, and so the agent;
- its environment does not carry tm's bootstrap on PYTHONPATH (a container or launcher that
  built a fresh environment), read from /proc/<pid>/environ;
- TRAINMETER_DISABLE=1 in its environment;
- the interpreter cannot import trainmeter, or is older than 3.10: asked once per executable by
  `supervisor.python_check`, on a background thread so a tick never waits for it.

What the command line and the environment say (the flags, PYTHONPATH, TRAINMETER_DISABLE) is
judged as soon as a Python is seen, and so is an interpreter other than `tm`'s own (asked at
once, on the background thread): none of them can change, and a run of a second ends otherwise
with nothing said while it ran. Only a Python of `tm`'s own interpreter, which should say hello
any moment, is given its grace (`GRACE_S`) before the interpreter is asked.

It only reads /proc through psutil: it never signals, traces or waits on a process. A Python
forked from another one (a DataLoader worker) runs the parent's code without a new interpreter
start, so it is judged through its parent, never on its own.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from .. import records
from ..records import ENV_DISABLE
from .launcher import bootstrap_path as bootstrap_dir  # the directory tm puts on PYTHONPATH
from .python_check import why_silent

GRACE_S = 2.0  # a Python without hello after this long is looked at
ROOT_GRACE_S = 3.0  # a non-Python root with no Python under it after this long is reported
UNKNOWN_GRACE_S = 10.0  # a silent Python with no known reason, when nobody said hello at all
FORK_LOOKS = 3  # ticks a child that still shows its parent's command line is looked at again
_PYTHON_NAME = re.compile(r"^python(\d+(\.\d+)*)?[a-z]?$")
_NOTE_MAX = 240

Diagnose = Callable[[str, Mapping[str, str]], "str | None"]


def is_python(exe: str, cmdline: list[str]) -> bool:
    """Whether the process runs a Python interpreter (by its executable, else its argv[0])."""
    for candidate in (exe, cmdline[0] if cmdline else ""):
        if candidate and _PYTHON_NAME.match(os.path.basename(candidate)):
            return True
    return False


def interpreter_flags(cmdline: list[str]) -> set[str]:
    """The one-letter options given to the interpreter, before its script, -c or -m.

    `python -uI train.py` -> {"u", "I"}; options after the script are the script's own.
    """
    flags: set[str] = set()
    args = iter(cmdline[1:])
    for arg in args:
        if arg == "--" or not arg.startswith("-") or arg == "-":
            break
        if arg.startswith("--"):
            if arg == "--check-hash-based-pycs":
                next(args, None)
            continue
        cluster = arg[1:]
        for i, letter in enumerate(cluster):
            if letter in "cm":
                return flags  # the program follows
            if letter in "WX":
                if i == len(cluster) - 1:
                    next(args, None)  # -W ignore: the value is the next word
                break
            flags.add(letter)
    return flags


_FLAG_REASONS = {
    "I": "python started with -I (isolated mode ignores PYTHONPATH, so tm's agent never loads)",
    "S": "python started with -S (no site module, so tm's sitecustomize never runs)",
    "E": "python started with -E (PYTHONPATH is ignored, so tm's agent never loads)",
}


def _same_file(a: str, b: str) -> bool:
    """Whether `a` is taken for `b`'s interpreter: the same path, or a `python*` in the same
    directory (a virtualenv's `python`, `python3` and `python3.11` are one interpreter). Links
    are not followed: a virtualenv's `bin/python` links to the base interpreter, and following
    the link would take one for the other."""
    try:
        return os.path.abspath(a) == os.path.abspath(b) or os.path.samefile(
            os.path.dirname(os.path.abspath(a)), os.path.dirname(os.path.abspath(b))
        ) and os.path.basename(a).startswith("python")
    except OSError:
        return False


def _on_pythonpath(env: Mapping[str, str], directory: str) -> bool:
    entries = env.get("PYTHONPATH", "").split(os.pathsep)
    target = os.path.realpath(directory)
    return any(entry and os.path.realpath(entry) == target for entry in entries)


class _Proc:
    """What the watcher reads about one process, once; None fields when /proc would not say."""

    def __init__(self, pid: int) -> None:
        import psutil

        self.pid = pid
        process = psutil.Process(pid)
        with process.oneshot():
            self.cmdline: list[str] = process.cmdline()
            if not self.cmdline:
                # Just exec'd: the kernel sets the arguments a moment after the new program
                # (and before that /proc shows none). Judged on that, -I would be missed.
                raise LookupError(f"pid {pid}: no command line yet")
            self.create_time: float = process.create_time()
            self.ppid: int = process.ppid()
            try:
                self.exe = process.exe()
            except (psutil.AccessDenied, psutil.ZombieProcess, OSError):
                self.exe = ""
        self._process = process

    def environ(self) -> dict[str, str] | None:
        try:
            return dict(self._process.environ())
        except Exception:  # noqa: BLE001 - not ours to read (another user), or gone
            return None

    def launched_as(self, environ: Mapping[str, str] | None) -> str:
        """The interpreter path as it was started, for asking it again.

        Not `exe()`: a virtualenv's `bin/python` is a link to the base interpreter, and /proc
        shows the base, which has none of the virtualenv's packages. argv[0] is what chose them.
        """
        argv0 = self.cmdline[0] if self.cmdline else ""
        if argv0 and os.sep not in argv0:
            path = (environ or {}).get("PATH") or os.environ.get("PATH")
            argv0 = shutil.which(argv0, path=path) or ""
        elif argv0 and not os.path.isabs(argv0):
            try:
                argv0 = os.path.join(self._process.cwd(), argv0)
            except Exception:  # noqa: BLE001 - the process may be gone or not ours to read
                argv0 = ""
        return argv0 if argv0 and os.path.exists(argv0) else self.exe

    def note(self) -> str:
        text = " ".join(records.redact_argv(self.cmdline)) or self.exe or "?"
        if len(text) > _NOTE_MAX:
            text = text[: _NOTE_MAX - 3] + "..."
        return f"pid {self.pid}: {text}"


class SilentPythonWatcher:
    """Turns "a Python in the tree never said hello" into `observe_only` facts with a reason."""

    def __init__(
        self,
        env: Mapping[str, str] | None = None,
        *,
        grace_s: float = GRACE_S,
        root_grace_s: float = ROOT_GRACE_S,
        unknown_grace_s: float = UNKNOWN_GRACE_S,
        clock: Callable[[], float] = time.time,
        diagnose: Diagnose = why_silent,
        bootstrap: str | None = None,
    ) -> None:
        self.env = dict(os.environ if env is None else env)
        self.grace_s = grace_s
        self.root_grace_s = root_grace_s
        self.unknown_grace_s = unknown_grace_s
        self.clock = clock
        self.diagnose = diagnose
        self.bootstrap = bootstrap or bootstrap_dir()
        self._procs: dict[int, _Proc] = {}
        self._done: set[int] = set()  # judged (a reason found, cleared, or forked)
        self._reported: set[str] = set()
        self._root: int | None = None
        self._saw_python = False
        self._saw_hello = False
        self._asked: dict[str, list[Any]] = {}  # exe -> [finished?, reason]; one thread each
        self._lock = threading.Lock()
        self._fork_looks: dict[int, int] = {}  # pid -> ticks it still showed its parent's argv
        self._unexeced: set[int] = set()  # this tick: children not yet past their exec

    # ---- the supervisor's call ------------------------------------------------------------

    def tick(self, tree_pids: list[int], hello_pids: set[int]) -> list[dict[str, Any]]:
        """New `observe_only` fact payloads (each reason once). `tree_pids[0]` is the root."""
        if hello_pids:
            self._saw_hello = True
        if tree_pids and self._root is None:
            self._root = tree_pids[0]
        now = self.clock()
        procs = [p for p in map(self._read, tree_pids) if p is not None]
        if any(is_python(p.exe, p.cmdline) for p in procs):
            self._saw_python = True  # before judging the root: the tree is seen as a whole
        self._unexeced = {p.pid for p in procs if self._before_exec(p, tree_pids)}
        found: list[dict[str, Any]] = []
        for proc in procs:
            if proc.pid in self._done or proc.pid in hello_pids:
                continue
            verdict = self._judge(proc, now, tree_pids)
            if verdict is not None:
                self._done.add(proc.pid)
                if verdict and verdict not in self._reported:
                    self._reported.add(verdict)
                    found.append(self._fact(verdict, proc))
        return found

    # ---- judging one process --------------------------------------------------------------

    def _read(self, pid: int) -> _Proc | None:
        """The process as /proc shows it now; read again every tick until it is judged, since a
        child read between its fork and its exec still shows its parent's program."""
        proc = self._procs.get(pid)
        if proc is None or pid not in self._done:
            try:
                proc = _Proc(pid)
            except Exception:  # noqa: BLE001 - gone, a zombie, or not readable: nothing to say
                return self._procs.get(pid) if pid in self._done else None
            self._procs[pid] = proc
        return proc

    def _before_exec(self, proc: _Proc, tree: list[int]) -> bool:
        """A child that is not a Python and still shows its parent's command line: a shell's
        fork caught before its exec (`sh -c "python -I train.py"` for a moment looks like a
        second `sh`). Looked at again for a few ticks before it counts as a helper; a subshell
        that never execs (a `while` loop in a pipe) is then judged as what it is."""
        if proc.pid in self._done or proc.pid == tree[0] or proc.ppid not in tree:
            return False
        if is_python(proc.exe, proc.cmdline):
            return False
        parent = self._procs.get(proc.ppid)
        if parent is None or parent.cmdline != proc.cmdline:
            return False
        looks = self._fork_looks.get(proc.pid, 0) + 1
        self._fork_looks[proc.pid] = looks
        return looks <= FORK_LOOKS

    def _judge(self, proc: _Proc, now: float, tree: list[int]) -> str | None:
        """A reason; "" when judged with nothing to report; None to look again next tick."""
        age = now - proc.create_time
        if not is_python(proc.exe, proc.cmdline):
            if proc.pid in self._unexeced:
                return None  # between fork and exec: what it runs is not known yet
            if proc.pid != self._root:
                return ""  # a helper binary under a Python: not ours to judge
            if self._unexeced and not (self._saw_python or self._saw_hello):
                return None  # a child is about to exec, perhaps into a Python
            if self._saw_python or self._saw_hello or age < self.root_grace_s:
                return "" if (self._saw_python or self._saw_hello) else None
            name = os.path.basename(proc.cmdline[0] if proc.cmdline else proc.exe) or "?"
            return (
                f"the command is not a Python program ({name}): tm watches it from outside "
                "only (GPU and host), with no steps, tokens or loss"
            )
        self._saw_python = True
        if self._forked(proc, tree):
            return ""
        flags = interpreter_flags(proc.cmdline)
        for letter in "ISE":
            if letter in flags:
                return _FLAG_REASONS[letter]
        environ = proc.environ()
        if environ is not None:
            if not _on_pythonpath(environ, self.bootstrap):
                return (
                    "its environment did not inherit tm's PYTHONPATH (a container or a launcher "
                    "that starts a fresh environment), so the agent never loads"
                )
            if environ.get(ENV_DISABLE) == "1":
                return "TRAINMETER_DISABLE=1 in its environment: the agent stays off"
        exe = proc.launched_as(environ)
        if age < self.grace_s and (not exe or _same_file(exe, sys.executable)):
            return None  # tm's own interpreter: it should say hello any moment
        if exe:
            asked = self._ask(exe, environ if environ is not None else self.env)
            if asked is None:
                return None  # the interpreter is being asked; look again next tick
            if asked:
                return asked
        if self._saw_hello:
            return ""  # the agent runs elsewhere in the tree; no reason to show for this one
        if age >= self.unknown_grace_s:
            return (
                f"a Python ran over {self.unknown_grace_s:g} s without the agent saying hello, "
                f"for no reason tm can see; `tm doctor --python {exe}` may tell more"
            )
        return None

    def _forked(self, proc: _Proc, tree: list[int]) -> bool:
        """A fork of a Python in the tree (same command line, no new interpreter start)."""
        if proc.ppid not in tree:
            return False
        parent = self._read(proc.ppid)
        return parent is not None and parent.cmdline == proc.cmdline

    def _ask(self, exe: str, env: Mapping[str, str]) -> str | None:
        """The diagnosis of `exe`: None while pending, "" when it loads the agent, else why."""
        with self._lock:
            slot = self._asked.get(exe)
            if slot is None:
                slot = self._asked[exe] = [False, ""]
                thread = threading.Thread(
                    target=self._diagnose_into,
                    args=(slot, exe, dict(env)),
                    name="trainmeter-diagnose",
                    daemon=True,
                )
                thread.start()
            finished, reason = slot
        return reason if finished else None

    def _diagnose_into(self, slot: list[Any], exe: str, env: dict[str, str]) -> None:
        try:
            reason = self.diagnose(exe, env) or ""
        except Exception:  # noqa: BLE001 - a failed diagnosis says nothing
            reason = ""
        with self._lock:
            slot[0], slot[1] = True, reason

    @property
    def reported(self) -> set[str]:
        """The reasons already given (each once)."""
        return set(self._reported)

    @staticmethod
    def _fact(reason: str, proc: _Proc) -> dict[str, Any]:
        return {"key": "observe_only", "value": reason, "source": "detected", "note": proc.note()}

    def wait_for_diagnoses(self, timeout: float = 60.0) -> None:
        """Block until every interpreter asked about has answered (tests, the end of a run)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if all(slot[0] for slot in self._asked.values()):
                    return
            time.sleep(0.02)


NOT_PYTHON = (
    "the command is not a Python program ({name}): tm watches it from outside only (GPU and "
    "host), with no steps, tokens or loss"
)


def _shebang_python(path: str) -> str | None:
    """The interpreter a script's `#!` line names when it is a Python (torchrun, accelerate)."""
    try:
        with open(path, "rb") as fh:
            first = fh.readline(256)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode("utf-8", "replace").split()
    for word in words[:2]:  # `#!/venv/bin/python` or `#!/usr/bin/env python3`
        if is_python(word, [word]):
            return word
    return None


def _script_python(path: str) -> list[str] | None:
    """The first Python command line a shell script runs (`python -I train.py`,
    `/other/venv/bin/python train.py`), words from the interpreter on; None when none is
    found. Read as text, never run: a line that does not split as shell words is skipped."""
    import shlex

    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read(65536)
    except OSError:
        return None
    for line in text.splitlines()[1:] if text.startswith("#!") else text.splitlines():
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            continue
        for i, word in enumerate(words):
            if is_python(word, [word]):
                return words[i:]
    return None


def _judge_command(command: list[str], env: Mapping[str, str], diagnose: Diagnose) -> str:
    """Why this Python command line runs without the agent ("" when it would load it)."""
    for letter in "ISE":
        if letter in interpreter_flags(command):
            return _FLAG_REASONS[letter]
    program = command[0]
    exe = program if os.sep in program else (shutil.which(program, path=env.get("PATH")) or "")
    if not exe:
        return ""
    try:
        return diagnose(exe, env) or ""
    except Exception:  # noqa: BLE001 - a failed diagnosis says nothing
        return ""


def reason_without_hello(
    command: list[str],
    env: Mapping[str, str],
    *,
    diagnose: Diagnose = why_silent,
) -> str:
    """Why no Python of the run said hello, judged from the command once the run is over.

    The live watcher needs a Python to live a couple of seconds before it judges it; a short
    run (`tm -- sleep 1`, `tm -- python -I -c ...`) ends first. This says the same things from
    the command line alone: not a Python program, the interpreter's flags, the environment,
    then the interpreter itself (asked once, as `tm doctor --python` does).
    """
    program = command[0] if command else "?"
    name = os.path.basename(program) or program
    path = program if os.sep in program else shutil.which(program, path=env.get("PATH"))
    exe = path or program
    interpreter = exe
    if not is_python(exe, command):
        shebang = _shebang_python(exe) if path else None
        if shebang is None:
            # a shell script: the Python it runs may have ended before the watcher saw it
            inner = _script_python(exe) if path else None
            if inner and env.get(ENV_DISABLE) != "1":
                said = _judge_command(inner, env, diagnose)
                if said:
                    return f"{said} (the Python that {name} runs: {' '.join(inner[:4])})"
            return NOT_PYTHON.format(name=name)
        interpreter = shebang if os.sep in shebang else (shutil.which(shebang) or shebang)
    else:
        flags = interpreter_flags(command)
        for letter in "ISE":
            if letter in flags:
                return _FLAG_REASONS[letter]
    if env.get(ENV_DISABLE) == "1":
        return "TRAINMETER_DISABLE=1 in its environment: the agent stays off"
    try:
        asked = diagnose(interpreter, env)
    except Exception:  # noqa: BLE001 - a failed diagnosis still leaves the plain reason below
        asked = None
    if asked:
        return asked
    return (
        "no Python of the run said hello before it ended, for no reason tm can see; "
        f"`tm doctor --python {interpreter}` may tell more"
    )
