"""The runs page and runs side by side, in headless Chromium: `tm runs --web` lists every run
with its status, cause of death and headline numbers, filters, sorts, opens one and compares
several; `tm compare A B --web` overlays both runs' loss with their names and puts their
settings in one table, the rows that differ marked. Both pass AA contrast in both themes
(axe-core) and do not scroll sideways at 390 px.

Three runs of a script that reports steps and a loss as the agent would (tm --no-agent, no
torch: under a second each): two finished with different batches, one that exits 1.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from trainmeter.views.format import metric, si

from ..conftest import default_signals, run_dirs, run_tm, tm_env
from .test_web_browser import CHROMIUM, CHROMIUM_ARGS

pytestmark = pytest.mark.slow
playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect
if not os.path.exists(CHROMIUM):
    pytest.skip(f"{CHROMIUM} is not installed", allow_module_level=True)

CHILD = """
import json, os, socket, sys, time
steps, tokens, rate, code = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
t0 = time.monotonic()
lines = []
for n in range(1, steps + 1):
    t = t0 + 0.01 * n
    lines.append(json.dumps({"v": 1, "t": t, "src": "agent", "rank": 0, "pid": os.getpid(),
        "kind": "step", "d": {"k": 1, "tokens": tokens, "n": n, "micro": 1}}))
    lines.append(json.dumps({"v": 1, "t": t, "src": "emit", "rank": 0, "pid": os.getpid(),
        "kind": "metric", "d": {"key": "train_loss", "value": 4.0 * rate ** n, "via": "emit",
        "step": n}}))
for i in range(0, len(lines), 20):
    s.sendto("\\n".join(lines[i:i + 20]).encode(), os.environ["TRAINMETER_SOCKET"])
time.sleep(0.3)
sys.exit(code)
"""
RUNS = {  # name: (steps, tokens a step, loss rate, exit status)
    "baseline": (60, 1024, 0.97, 0),
    "bigger-batch": (60, 2048, 0.95, 0),
    "diverged": (40, 1024, 1.01, 1),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    cwd = tmp_path_factory.mktemp("runs")
    (cwd / "child.py").write_text(CHILD)
    for name, (steps, tokens, rate, code) in RUNS.items():
        result = run_tm(["-q", "--no-web", "--no-agent", "--name", name, "child.py", str(steps),
                         str(tokens), str(rate), str(code)], cwd)
        assert result.returncode == code, result.stderr
    return cwd


class _Served:
    """`tm ARGS` serving until SIGINT; `.url` is the address it printed."""

    def __init__(self, args: list[str], cwd: Path) -> None:
        # stopped by SIGINT: started as from a terminal, never with it inherited ignored (a
        # suite run by `nohup ... &` ignores SIGINT, and so would every child it starts)
        self.proc = subprocess.Popen([sys.executable, "-m", "trainmeter", *args], cwd=cwd,
                                     env=tm_env(), stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True,
                                     preexec_fn=default_signals)
        line = self.proc.stderr.readline()
        found = re.search(r"(http://127\.0\.0\.1:\d+/\S*)", line)
        assert found, line + self.proc.stderr.read()
        self.url = found.group(1)

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGINT)
        return self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def browser():
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def site(runs):
    served = _Served(["runs", "--web", "--port", "0"], runs)
    yield served.url
    assert served.stop() == 0


def _summary(runs: Path, name: str) -> dict:
    run = next(d for d in run_dirs(runs) if d.name.endswith(name))
    return json.loads((run / "summary.json").read_text())


def test_compare_web_overlays_both_runs_loss_with_their_names(browser, runs):
    served = _Served(["compare", "baseline", "diverged", "--web", "--port", "0"], runs)
    try:
        assert "/compare?runs=" in served.url
        page = browser.new_page(viewport={"width": 1440, "height": 1000})
        page.goto(served.url)
        page.wait_for_selector("body[data-compared]")
        loss = page.locator('[data-chart="loss"]')
        dirs = {d.name for d in run_dirs(runs) if d.name.endswith(("baseline", "diverged"))}
        assert set(loss.get_attribute("data-runs").split()) == dirs
        assert loss.locator(".keys .key").all_inner_texts() == ["baseline", "diverged"]
        assert int(loss.get_attribute("data-points")) == 60  # steps 1..60 joined (40 and 60)
        # both curves, by their names, in the chart's text alternative, each ending on its run's
        # last logged loss
        loss.locator(".chart-data summary").click()
        # the table is filled on the details' toggle event, after the click returns: expect waits
        expect(loss.locator("thead th")).to_have_text(["step", "baseline", "diverged"])
        rows = loss.locator("tbody tr")
        last = rows.nth(rows.count() - 1).locator("td").all_inner_texts()
        assert last == [metric(_summary(runs, "baseline")["series"]["train_loss"]["value"]), ""]
        at_40 = rows.nth(39).locator("td").all_inner_texts()
        assert at_40[1] == metric(_summary(runs, "diverged")["series"]["train_loss"]["value"])
        # their settings and numbers in one table: what differs is marked
        table = page.locator("#settings")
        assert table.locator("thead th").all_inner_texts()[1:] == [
            f"{n}\n{d}" for n, d in zip(("baseline", "diverged"), sorted(dirs), strict=True)]
        status = table.locator('tr[data-row="Status"]')
        assert "differs" in status.get_attribute("class")
        assert status.locator("td").all_inner_texts() == ["ok", "exit 1"]
        assert "differs" in table.locator('tr[data-row="Final loss"]').get_attribute("class")
        assert table.locator('tr[data-row="Step time"]').get_attribute("class") is None  # 10 ms both
        # aligned by tokens instead of steps: 1024 tokens a step for both
        page.locator("#align").select_option("tokens")
        page.wait_for_timeout(200)
        loss.locator(".chart-data summary").click()
        expect(page.locator('[data-chart="loss"] thead th').first).to_have_text("tokens")
        page.close()
    finally:
        assert served.stop() == 0


def test_the_runs_page_lists_filters_sorts_and_opens_a_comparison(browser, site, runs):
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    page.goto(site)
    page.wait_for_selector("body[data-listed]")
    rows = page.locator("#runs tbody tr")
    assert rows.count() == 3
    died = page.locator('#runs tbody tr.died td[data-state="died"]')
    assert died.inner_text() == "exit 1"  # the cause of death, where the status goes
    base = _summary(runs, "baseline")
    row = page.locator("#runs tbody tr", has_text="baseline").locator("td").all_inner_texts()
    assert si(base["tokens_per_s"]) in row and metric(base["series"]["train_loss"]["value"]) in row
    # filter by words, then by state
    page.locator("#filter").fill("bigger")
    assert rows.count() == 1 and "bigger-batch" in rows.first.inner_text()
    assert page.locator("#runs-count").inner_text() == "1 of 3 runs shown"
    page.locator("#filter").fill("")
    page.locator("#state-filter").select_option("died")
    assert rows.count() == 1 and "diverged" in rows.first.inner_text()
    page.locator("#state-filter").select_option("finished")
    assert rows.count() == 2
    page.locator("#state-filter").select_option("all")
    # sort by the final loss: highest first, then lowest first after a second click
    page.locator('button[data-sort="loss"]').click()
    names = [page.locator("#runs tbody tr").nth(i).get_attribute("data-run").split("-", 2)[2]
             for i in range(3)]
    assert names == ["diverged", "baseline", "bigger-batch"]  # highest loss first
    page.locator('button[data-sort="loss"]').click()
    names = [page.locator("#runs tbody tr").nth(i).get_attribute("data-run").split("-", 2)[2]
             for i in range(3)]
    assert names == ["bigger-batch", "baseline", "diverged"]
    # tick two and compare them
    button = page.locator("#compare-selected")
    assert button.is_disabled()
    for name in ("baseline", "bigger-batch"):
        page.locator("#runs tbody tr", has_text=name).locator("input[type=checkbox]").check()
    assert button.inner_text() == "Compare 2 runs"
    button.click()
    page.wait_for_selector("body[data-compared]")
    assert "/compare?runs=" in page.url
    keys = page.locator('[data-chart="loss"] .keys .key').all_inner_texts()
    assert sorted(keys) == ["baseline", "bigger-batch"]
    page.close()


def test_a_run_opens_in_its_own_dashboard(browser, site, runs):
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    page.goto(site)
    page.wait_for_selector("body[data-listed]")
    page.locator("#runs tbody tr", has_text="bigger-batch").locator("a").click()
    page.wait_for_selector('[data-tile="tokens_per_s"][data-value]')
    assert "/run/" in page.url
    summary = _summary(runs, "bigger-batch")
    assert float(page.locator('[data-tile="tokens_per_s"]').get_attribute("data-value")) == \
        summary["tokens_per_s"]
    assert page.locator("#status").inner_text() == "finished (replayed)"
    page.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_runs_and_comparison_pass_aa_contrast_and_fit_a_phone(browser, site, runs, scheme):
    from .test_web_a11y import AXE, contrast_violations, no_sideways_scroll

    if not AXE.exists():
        pytest.skip("axe-core is not installed: run scripts/install_system_deps.sh")
    dirs = ",".join(d.name for d in run_dirs(runs))
    for url, ready in ((site, "body[data-listed]"), (f"{site}compare?runs={dirs}", "body[data-compared]")):
        for width in (1440, 390):
            ctx = browser.new_context(color_scheme=scheme, bypass_csp=True,
                                      viewport={"width": width, "height": 900})
            page = ctx.new_page()
            try:
                page.goto(url)
                page.wait_for_selector(ready)
                if width == 390:
                    wide, viewport = no_sideways_scroll(page)
                    assert wide <= viewport, (url, wide)
                else:
                    bad = contrast_violations(page)
                    assert bad == [], f"{scheme} {url}: " + "\n".join(bad)
            finally:
                ctx.close()


def test_the_pages_own_formatter_reads_the_shared_table_in_chromium(browser, site):
    """The fixture table the terminal's rule is checked against, read by the page's
    format.js in the browser the page runs in (tests/views/test_format.py runs it under Node)."""
    cases = json.loads((Path(__file__).with_name("format_cases.json")).read_text())["cases"]
    ctx = browser.new_context(bypass_csp=True)
    page = ctx.new_page()
    try:
        page.goto(site)
        page.wait_for_selector("body[data-listed]")
        got = page.evaluate(
            """cases => cases.map(([name, args]) =>
                 window.TMFormat[name](...args.map(a => a === 'nan' ? NaN : a)))""", cases)
    finally:
        ctx.close()
    assert [g for g, (_, _, want) in zip(got, cases, strict=True) if g != want] == []
    assert len(got) == len(cases) > 100
