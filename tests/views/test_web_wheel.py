"""The built wheel carries the page: installed in a fresh virtualenv, its server serves every
static file (the page, its script and style, the vendored uPlot and its licence) from the
installed package, byte for byte the files in the source tree."""

from __future__ import annotations

import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from ..conftest import REPO

pytestmark = pytest.mark.slow

STATIC = REPO / "src" / "trainmeter" / "views" / "web" / "static"
SERVE = """
import sys, time, trainmeter
from trainmeter.views.web.server import serve
from trainmeter.views.web.state import DashboardState
server = serve(DashboardState(), 0)
print(trainmeter.__file__, server.port, flush=True)
sys.stdin.read()
"""


def test_the_wheel_serves_its_static_files(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    shutil.copytree(
        REPO / "src", src / "src", ignore=shutil.ignore_patterns("*.egg-info", "__pycache__")
    )
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
         "-w", str(dist), str(src)],
        check=True, timeout=240, capture_output=True,
    )
    [wheel] = dist.glob("trainmeter-*.whl")
    venv = tmp_path / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=240)
    python = venv / "bin" / "python"
    subprocess.run(  # this pip installs into the fresh venv (no pip of its own to bootstrap)
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
         "--no-index", str(wheel)],
        check=True, timeout=240, capture_output=True,
    )
    proc = subprocess.Popen(
        [str(python), "-c", SERVE], cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True,
    )
    try:
        where, port = proc.stdout.readline().split()
        assert Path(where).is_relative_to(venv)  # the installed copy, not the source tree
        files = ["index.html", "app.js", "format.js", "charts.js", "runs.html", "runs.js", "app.css",
                 "theme.js", "favicon.svg",
                 "vendor/uPlot.iife.min.js",
                 "vendor/uPlot.min.css", "vendor/uPlot.LICENSE"]
        for name in files:
            url = f"http://127.0.0.1:{port}/static/{name}"
            with urllib.request.urlopen(url, timeout=10) as resp:
                assert resp.status == 200
                assert resp.read() == (STATIC / name).read_bytes(), name
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as resp:
            assert resp.read() == (STATIC / "index.html").read_bytes()
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
