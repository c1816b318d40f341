"""A run whose names are hostile: metric keys and a run name that try Markdown, HTML, CSV
formula and terminal escape injection, and names that are not UTF-8."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ..conftest import default_signals, run_dirs, tm_env

KEYS = [
    "![x](http://e.example/x.png)",
    "<img src=x onerror=alert(1)>",
    "<script>alert(1)</script>",
    "[c](javascript:alert(1))",
    "a|b",
    "line\nbreak",
    '=HYPERLINK("http://e.example","x")',
    "+1+1",
    "-2+3",
    "@SUM(A1)",
    "\tTAB",
    "nul\x00key",
    "\x1b]52;c;aGk=\x07clip",
    "\x1b]0;title\x07",
    "\x1b[2Jclear",
    "\x9b31mcsi",
    "sur\udcffrogate",
]

SCRIPT = r"""
import sys
from trainmeter import emit
keys = KEYS
for step in range(5):
    emit(**{k: float(step + i) for i, k in enumerate(keys)})
print("ok")
"""

#: The escape bytes no output may carry to a terminal.
ESCAPES = ("\x1b]", "\x1b[", "\x9b", "\x07", "\x00")


def hostile_run(root: Path, name: bytes = b"\x1b]0;pwned\x07<b>|x\xff\xfe") -> Path:
    """Run the script (its file name not UTF-8 either) under `tm --name NAME`; its directory."""
    script = os.fsencode(root) + b"/n\xffo.py"
    with open(script, "w") as fh:
        fh.write(SCRIPT.replace("KEYS", repr(KEYS)))
    out = subprocess.run(
        [os.fsencode(sys.executable), b"-m", b"trainmeter", b"-q", b"--no-web", b"--name", name,
         script],
        cwd=root, env=tm_env(), capture_output=True, timeout=240, preexec_fn=default_signals,
    )
    assert out.returncode == 0, out.stderr.decode(errors="replace")[-3000:]
    return run_dirs(root)[-1]


def tm(root: Path, *args: str) -> subprocess.CompletedProcess:
    """`tm ARGS` with its output as bytes (what reaches the terminal)."""
    return subprocess.run(
        [sys.executable, "-m", "trainmeter", *args],
        cwd=root, env=tm_env(), capture_output=True, timeout=240, preexec_fn=default_signals,
    )
