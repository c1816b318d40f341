"""The suite gives the same answer however it is started (issue 22, item 14).

Under `nohup`, or as a background job of a script (as a CI runner may start it), SIGHUP,
SIGINT and SIGQUIT arrive ignored, and `tm` rightly hands that on as plain Python would. Before,
the signal tests then waited out their timeouts and failed (7 tests, 24 minutes instead of 8);
now every test sets the dispositions it relies on in the processes it starts. This runs the
signal tests in a pytest started with those three signals ignored.
"""

from __future__ import annotations

import signal
import subprocess
import sys

from ..conftest import REPO, tm_env

SIGNAL_TESTS = [
    "tests/supervisor/test_launcher.py::test_signals_sent_to_tm_are_forwarded_to_the_child",
    "tests/supervisor/test_launcher.py::test_ctrl_c_reaches_both_and_tm_waits_for_the_child",
    "tests/supervisor/test_launcher.py::test_ctrl_c_kills_a_child_that_does_not_handle_it",
    "tests/faults/test_signals.py::test_a_signal_sent_to_tm_alone_reaches_the_child_and_tm_lives",
    "tests/integration/test_deaths.py::test_sighup_is_named_not_numbered",
]


def _as_nohup_in_the_background() -> None:
    for signum in (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT):
        signal.signal(signum, signal.SIG_IGN)


def test_the_signal_tests_pass_when_started_with_signals_ignored() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *SIGNAL_TESTS],
        cwd=REPO, env=tm_env(), capture_output=True, text=True, timeout=300,
        preexec_fn=_as_nohup_in_the_background,
    )
    assert out.returncode == 0, out.stdout[-3000:]
    assert " passed" in out.stdout and "failed" not in out.stdout
