"""The HTML report of a real run opens in headless Chromium with no network request, and every
chart has its points."""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path

import pytest

from .conftest import STEPS, ExampleRun, tm_cli

pytestmark = pytest.mark.slow
CHROMIUM = os.environ.get("TM_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
        "--disable-background-networking"]


@pytest.fixture(scope="module")
def report(example_run: ExampleRun, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report") / "run.html"
    result = tm_cli(["report", "passported", "-o", str(out)], cwd=example_run.cwd)
    assert result.returncode == 0, result.stderr
    return out


def test_one_file_that_names_nothing_outside(report: Path, example_run: ExampleRun) -> None:
    page = report.read_text()
    assert "<script src" not in page and "<link" not in page  # everything inlined
    assert "Content-Security-Policy" in page and "default-src 'none'" in html.unescape(page)
    assert str(example_run.cwd) not in page


def test_opens_in_chromium_with_charts_and_no_network(report: Path, example_run: ExampleRun) -> None:
    playwright = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium")
    requests: list[str] = []
    errors: list[str] = []
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page()
            page.on("request", lambda r: requests.append(r.url))
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.goto(report.as_uri())
            page.wait_for_selector("body[data-charts-ready]")
            charts = page.evaluate(
                "window.tmCharts.map(u => ({title: u.tmTitle,"
                " points: u.data[0].length, last: u.data[1][u.data[1].length - 1],"
                " width: u.width}))"
            )
            passport = json.loads(page.locator("#tm-passport").text_content())
            # headline numbers, then the time split and the waterfall, then the charts
            order = page.evaluate(
                "['.tiles', '#charts'].map(q => document.querySelector(q)"
                ".getBoundingClientRect().top)"
            )
            legends = page.locator(".u-legend").count()
            # round ticks in a unit a person reads, as on the dashboard: "100 MiB", "20%"
            ticks = {c.get_attribute("data-chart"): c.get_attribute("data-y-ticks")
                     for c in page.locator(".chart[data-y-ticks]").all()}
            alternatives = page.locator(".chart .chart-data .csv").count()
            headline = page.locator("[data-headline]").all_inner_texts()
            page.screenshot(path=str(report.with_suffix(".png")), full_page=True)
        finally:
            browser.close()
    assert errors == []
    assert requests == [report.as_uri()]  # the page itself, nothing else
    assert order[0] < order[1] and legends == 0  # no empty legends
    assert any("Throughput" in h for h in headline)
    assert charts[0]["title"] == "Loss"  # the loss first
    by_title = {c["title"]: c for c in charts}
    loss = by_title["Loss"]
    assert loss["points"] == STEPS and loss["width"] > 0
    assert loss["last"] == example_run.summary["series"]["train_loss"]["value"]
    tps = by_title["Tokens per second"]
    assert tps["points"] > 0 and tps["last"] == pytest.approx(example_run.summary["tokens_per_s"])
    assert passport["training"]["steps"]["value"] == STEPS
    assert alternatives == len(charts)  # each chart: its data as a table and a CSV
    rss = ticks["host_rss_b"].split("|")
    assert len(rss) >= 2 and all(re.fullmatch(r"\d+ (B|KiB|MiB|GiB)", t) for t in rss), rss
    values = [int(t.split()[0]) for t in rss]
    steps = {b - a for a, b in zip(values, values[1:], strict=False)}
    assert len(steps) == 1 and re.fullmatch(r"[125]0*", str(steps.pop())), rss  # 1, 2, 5 x 10^k
    goodput = ticks["goodput"].split("|")
    assert all(re.fullmatch(r"\d+%", t) for t in goodput), goodput
