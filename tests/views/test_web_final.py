"""The live page ends on the run's final numbers, every time: 20 runs in a row.

A page open on a live run must show the final snapshot once the run ends, whatever the timing
of its last request: before, `tm` could exit before the last snapshot reached the page, which
then said "connection lost" over the last live numbers (4 of 30 such runs here). Each run is a
few lines that `emit` a loss (no torch: a run costs about a second): the page is opened, waits
until its event stream is open, then the script is told to finish at once, so the run's end
races the page.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from trainmeter.views.format import duration, metric

from ..conftest import run_dirs, tm_env
from .test_web_browser import CHROMIUM, CHROMIUM_ARGS

pytestmark = pytest.mark.slow
playwright_api = pytest.importorskip("playwright.sync_api")
if not os.path.exists(CHROMIUM):
    pytest.skip(f"{CHROMIUM} is not installed", allow_module_level=True)

RUNS = 20
FINAL_LOSS = 0.001234
SCRIPT = f"""
import os, sys, time
from trainmeter import emit
go = sys.argv[1]
for step in range(1, 3000):
    emit(train_loss=1.0 / step)
    time.sleep(0.01)
    if os.path.exists(go):
        break
emit(train_loss={FINAL_LOSS})
"""


def test_the_page_ends_on_the_final_snapshot_twenty_runs_in_a_row(tmp_path: Path) -> None:
    (tmp_path / "short.py").write_text(SCRIPT)
    env = tm_env()
    ended = []
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page()
        try:
            for i in range(RUNS):
                go = tmp_path / f"go{i}"
                proc = subprocess.Popen(
                    [sys.executable, "-m", "trainmeter", "--port", "0", "--name", f"r{i:02d}",
                     "short.py", str(go)],
                    cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                    text=True,
                )
                url = None
                for line in proc.stderr:
                    found = re.search(r"(http://127\.0\.0\.1:\d+/)", line)
                    if found:
                        url = found.group(1)
                        break
                assert url, f"run {i}: no dashboard address"
                page.goto(url)
                # the page's event stream is open (it says "starting" until the first
                # snapshot, "live" after): the run ends now, while the page reads it
                page.wait_for_selector("#status:is(.pill-live, .pill-wait:text('starting'))",
                                       timeout=30_000)
                go.touch()
                proc.stderr.read()
                assert proc.wait(timeout=60) == 0
                # tm has exited: whatever the page shows from here on, it already had (so a
                # longer wait lets nothing new in; 5 s was a renderer's time a loaded box can
                # outlast)
                page.wait_for_selector("#status.pill-done", timeout=30_000)
                summary = json.loads((run_dirs(tmp_path)[-1] / "summary.json").read_text())
                header = page.locator("#run-meta").inner_text()
                now = page.locator('[data-chart="loss"] .now').inner_text()
                ended.append((page.locator("#status").inner_text(), header, now,
                              duration(summary["time"]["elapsed_s"])))
        finally:
            browser.close()
    assert len(ended) == RUNS
    for i, (status, header, now, elapsed) in enumerate(ended):
        assert status == "finished", (i, status)
        assert f"elapsed {elapsed}" in header, (i, header, elapsed)  # the final snapshot's
        assert now == f"now {metric(FINAL_LOSS)}", (i, now)
