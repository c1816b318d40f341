"""The dashboard in a real browser (Debian's headless Chromium, driven by Playwright).

Against a live `tm` run of the example on the fake H100: the tiles show the engine's values,
charts have points and gain new ones while the run goes, an absent number shows its reason,
the explain panel opens, both themes render. Then against `tm view` of that same run once it
is stopped: the tiles hold exactly the numbers `tm summary --json` prints.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from ..conftest import EXAMPLES, REPO, run_dirs, run_tm, tm_env

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
FAKE_H100 = REPO / "tests" / "fixtures" / "nvml" / "h100_sxm_gpm.json"
URL = re.compile(r"(http://127\.0\.0\.1:\d+/)")

pytestmark = pytest.mark.slow

playwright_api = pytest.importorskip("playwright.sync_api")
if not os.path.exists(CHROMIUM):  # CI installs it with apt-get install chromium
    pytest.skip(f"{CHROMIUM} is not installed", allow_module_level=True)


@pytest.fixture(scope="module")
def browser():
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


class _Proc:
    """A `tm` child whose stderr is read on a thread, so its URL line can be waited for."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "trainmeter", *args],
            cwd=cwd,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.stderr.append(line)
            self.lines.put(line)

    def url(self, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.5)
            except queue.Empty:
                assert self.proc.poll() is None, "".join(self.stderr)
                continue
            match = URL.search(line)
            if match:
                return match.group(1)
        raise AssertionError("no dashboard URL on stderr: " + "".join(self.stderr))

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM, as a scheduler would stop a job (tm passes it on and writes the run's end)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise


@pytest.fixture(scope="module")
def live_run(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("live")
    env = tm_env(TRAINMETER_FAKE_NVML=str(FAKE_H100))
    proc = _Proc(
        ["--port", "0", "--convention", "megatron", str(EXAMPLES / "tiny_gpt.py"), "--steps", "3000"],
        cwd,
        env,
    )
    try:
        url = proc.url()
        assert sum(1 for line in proc.stderr if "dashboard" in line) == 1  # printed once
        yield cwd, url, proc
    finally:
        proc.stop()


def _state(page, url: str) -> dict:
    return json.loads(page.request.get(url + "api/state").text())


def _wait(page, expression: str, timeout: float = 45) -> None:
    """Poll `expression` in the page until true (the page's CSP forbids eval-based waits)."""
    deadline = time.monotonic() + timeout
    while not page.evaluate(expression):
        assert time.monotonic() < deadline, f"timed out waiting for {expression}"
        page.wait_for_timeout(200)


def _wait_seq(page, at_least: int = 1) -> None:
    _wait(page, f"Number(document.body.dataset.seq || 0) >= {at_least}")


def _tile(page, name: str):
    return page.locator(f'[data-tile="{name}"]')


def test_live_tiles_show_the_engines_values(browser, live_run):
    _, url, _ = live_run
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(url)
    # wait until the engine has a throughput (a few steps past warm-up)
    page.wait_for_selector('[data-tile="tokens_per_s"][data-value]', timeout=60_000)
    page.wait_for_selector('[data-tile="mfu"][data-value]', timeout=30_000)
    for _ in range(20):  # compare at the same snapshot: the page and /api/state agree on seq
        seq = int(page.evaluate("document.body.dataset.seq"))
        values = {n: _tile(page, n).get_attribute("data-value") for n in ("tokens_per_s", "mfu", "ofu")}
        snap_state = _state(page, url)
        if snap_state["seq"] == seq and int(page.evaluate("document.body.dataset.seq")) == seq:
            snap = snap_state["snapshot"]
            assert float(values["tokens_per_s"]) == snap["tokens_per_s"]
            assert float(values["mfu"]) == snap["mfu"]["value"]
            assert float(values["ofu"]) == snap["ofu"]["value"]
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the page never settled on one snapshot")
    mfu_text = _tile(page, "mfu").inner_text()
    assert "%" in mfu_text and "megatron" in mfu_text
    assert page.locator("#status").inner_text() == "live"
    page.close()


def test_live_charts_gain_points_while_the_run_goes(browser, live_run):
    _, url, _ = live_run
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(url)
    page.wait_for_selector('[data-chart="loss"][data-points]', timeout=60_000)
    before = int(page.locator('[data-chart="loss"]').get_attribute("data-points"))
    assert before > 0
    assert page.locator('[data-chart="loss"] canvas').count() >= 1
    _wait(page, f"Number(document.querySelector('[data-chart=loss]').dataset.points) > {before}")
    page.wait_for_selector('[data-chart="throughput"][data-points]', timeout=30_000)
    # the x axis switches to tokens, FLOPs spent, then time: the same points, redrawn
    for axis in ("tokens", "flops", "time"):
        page.select_option("#axis", axis)
        _wait(page, "Number(document.querySelector('[data-chart=loss]').dataset.points) > 0")
    page.close()


def test_live_absent_number_shows_its_reason(browser, live_run):
    _, url, _ = live_run
    page = browser.new_page()
    page.goto(url)
    _wait_seq(page)
    absent = _state(page, url)["snapshot"]["absent"]
    assert "progress" in absent  # no budget was declared
    item = page.locator('[data-absent="progress"]')
    assert absent["progress"] in item.inner_text()
    assert absent["progress"] in page.locator("#p-absent").inner_text()
    assert page.locator("#p-pct").inner_text().startswith("n/a")
    page.close()


def test_live_explain_opens_for_a_clicked_number(browser, live_run):
    _, url, _ = live_run
    page = browser.new_page()
    page.goto(url)
    page.wait_for_selector('[data-tile="mfu"][data-value]', timeout=60_000)
    _tile(page, "mfu").click()
    drawer = page.locator("#explain")
    drawer.wait_for(state="visible")
    assert page.locator("#explain-title").inner_text().startswith("Model FLOPs utilization")
    snap = _state(page, url)["snapshot"]
    explained = (snap.get("explain") or {}).get("mfu")
    body = page.locator("#explain-body").inner_text()
    if explained:  # the engine explains: its formula and inputs are shown
        assert explained["formula"] in body
        assert all(i["name"] in body for i in explained["inputs"])
    else:  # no explanation from this engine: say so, and show what the snapshot holds
        assert "no worked explanation" in body
        row = page.locator('#explain-body tr[data-raw="convention"]')
        assert snap["mfu"]["convention"] in row.inner_text()
    page.keyboard.press("Escape")
    drawer.wait_for(state="hidden")
    page.close()


@pytest.mark.parametrize("scheme,dark", [("light", False), ("dark", True)])
def test_both_themes_render(browser, live_run, tmp_path, scheme, dark):
    _, url, _ = live_run
    page = browser.new_page(color_scheme=scheme, viewport={"width": 1400, "height": 900})
    page.goto(url)
    page.wait_for_selector('[data-chart="loss"] canvas', timeout=60_000)
    bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
    rgb = [int(x) for x in re.findall(r"\d+", bg)[:3]]
    assert (sum(rgb) / 3 < 80) == dark, bg
    ink = page.evaluate("getComputedStyle(document.body).color")
    assert ink != bg
    shot = tmp_path / f"{scheme}.png"
    page.screenshot(path=str(shot))
    assert shot.stat().st_size > 20_000  # a drawn page, not a blank one
    page.close()


@pytest.fixture(scope="module")
def viewed_run(live_run):
    """The live run stopped, then `tm view` of it, and `tm summary --json` of it."""
    cwd, url, proc = live_run
    deadline = time.monotonic() + 90
    while True:  # past warm-up (when run alone, this fixture comes first)
        with urllib.request.urlopen(url + "api/state", timeout=10) as resp:
            snap = json.loads(resp.read())["snapshot"]
        if snap.get("steps", 0) >= 20 and "tokens_per_s" in snap and "mfu" in snap:
            break
        assert time.monotonic() < deadline, "the live run did not get going"
        time.sleep(0.3)
    proc.stop()
    [run] = run_dirs(cwd)
    summary = run_tm(["summary", str(run), "--json"], cwd)
    assert summary.returncode == 0, summary.stderr
    view = _Proc(["view", str(run), "--port", "0"], cwd, tm_env())
    try:
        yield view.url(), json.loads(summary.stdout)
    finally:
        view.stop()


def test_view_shows_the_very_numbers_of_tm_summary(browser, viewed_run):
    url, summary = viewed_run
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(url)
    page.wait_for_selector('[data-tile="tokens_per_s"][data-value]')
    assert json.loads(page.request.get(url + "api/state").text())["snapshot"] == summary
    expected = {
        "tokens_per_s": summary["tokens_per_s"],
        "step_time_s": summary["step_time_s"],
        "mfu": summary["mfu"]["value"],
        "ofu": summary["ofu"]["value"],
        "goodput": summary["time"]["goodput"],
        "energy": summary["energy"]["joules"],
        "flops_per_token": summary["flops_per_token"]["value"],
    }
    for name, value in expected.items():
        assert float(_tile(page, name).get_attribute("data-value")) == value, name
    assert page.locator("#status").inner_text().startswith("finished")
    for key, reason in summary["absent"].items():
        assert reason in page.locator(f'[data-absent="{key}"]').inner_text()
    points = int(page.locator('[data-chart="loss"]').get_attribute("data-points"))
    assert points > 1
    page.close()


def test_explain_panel_shows_formula_inputs_and_peak(browser):
    """A snapshot with the engine's explanation (the snapshot contract's shape), served as is."""
    from trainmeter.views.web.server import serve, stop
    from trainmeter.views.web.state import DashboardState

    snap = json.loads((REPO / "tests" / "fixtures" / "web" / "snapshot_explained.json").read_text())
    state = DashboardState(mode="view", run_dir="/runs/x")
    state.on_finish(snap)
    srv = serve(state, 0)
    try:
        page = browser.new_page()
        page.goto(srv.url)
        _tile(page, "mfu").click()
        page.locator("#explain").wait_for(state="visible")
        ex = snap["explain"]["mfu"]
        assert page.locator("[data-formula]").inner_text() == ex["formula"]
        for item in ex["inputs"]:
            row = page.locator(f'#explain-body tr[data-input="{item["name"]}"]')
            assert item["source"] in row.inner_text()
        assert ex["peak_source"] in page.locator("#explain-body").inner_text()
        # an absent number: its tile says why, and so does its explanation
        ofu_tile = _tile(page, "ofu")
        assert snap["absent"]["ofu"] in ofu_tile.inner_text()
        page.keyboard.press("Escape")
        ofu_tile.click()
        assert snap["absent"]["ofu"] in page.locator("#explain-body").inner_text()
        page.keyboard.press("Escape")
        # per-rank step times: four ranks, rank 3 the slowest (0.0210 / 0.0149 - 1 = 40.9%)
        ranks = page.locator("#ranks")
        assert ranks.locator("tbody tr").count() == 4
        assert "slowest" in ranks.locator("tr.slow").inner_text()
        assert "rank 3" in ranks.locator("tr.slow").inner_text()
        assert "40.9%" in ranks.inner_text()
        # the alert the engine raised is shown, with its message
        assert snap["alerts"][0]["message"] in page.locator("#alerts").inner_text()
        # the engine's notes on reading the numbers, one click away
        page.locator("#alerts details.notes summary").click()
        assert snap["warnings"][0] in page.locator("#alerts details.notes").inner_text()
        page.close()
    finally:
        stop(srv)
