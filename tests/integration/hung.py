"""The hang test's run (test_deaths), started as the session starts.

The test needs 62 s of silence from a run under `tm` (over the stuck alert's 60 s floor). The
hung child sleeps and costs no CPU, so its silence passes while the rest of the suite runs; by
the time test_deaths is reached the test waits only for what is left of the 62 s (nothing, in
the full suite; a module of its own, as before, run alone). Started by this directory's
conftest once collection knows the hang test is selected, never otherwise.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from tests.conftest import default_signals, tm_env

SCRIPTS = Path(__file__).parent / "scripts"
DIES = str(SCRIPTS / "dies.py")
HANG_TEST = "test_a_hang_ended_by_a_timeout_says_it_hung"
HANG_MODULE = "test_deaths.py"


class HungRun:
    """`tm --no-web dies.py hang 6`: six steps 0.3 s apart, READY, then silence (the child
    sleeps an hour at most, longer than any suite). `ready` is when READY was printed, read
    on a thread so that nobody has to be waiting for it."""

    def __init__(self) -> None:
        self.cwd = Path(tempfile.mkdtemp(prefix="tm-hang-"))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "trainmeter", "--no-web", DIES, "hang", "6"],
            cwd=self.cwd, env=tm_env(OMP_NUM_THREADS="1", DIES_STEP_PAUSE="0.3"),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            preexec_fn=default_signals,
        )
        self._ready = threading.Event()
        self.ready_at = 0.0
        threading.Thread(target=self._read_until_ready, daemon=True).start()

    def _read_until_ready(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("READY"):
                self.ready_at = time.monotonic()
                break
        self._ready.set()  # READY, or the child's stdout closed without it

    def ready(self, timeout: float = 240) -> float:
        """The monotonic time of READY (an AssertionError if the run ended without it)."""
        assert self._ready.wait(timeout) and self.ready_at, "the hung run never printed READY"
        return self.ready_at

    def close(self) -> None:
        """SIGTERM if the test did not end it (it failed first), then the directory."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.communicate()
        shutil.rmtree(self.cwd, ignore_errors=True)


#: The session's hung run, once started.
STARTED: list[HungRun] = []


def selected(items: list) -> bool:
    return any(item.name == HANG_TEST and item.path.name == HANG_MODULE for item in items)


def started() -> HungRun:
    """The session's hung run (started now if the conftest's hook did not)."""
    if not STARTED:
        STARTED.append(HungRun())
    return STARTED[0]
