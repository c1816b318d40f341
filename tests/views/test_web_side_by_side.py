"""The dashboard fixes docs/side-by-side.md asked for, on a real CPU-only snapshot of
examples/tiny_gpt.py (no convention chosen, no GPU, no checkpoint and no eval)."""

from __future__ import annotations

import json

import pytest

from ..conftest import REPO
from .test_web_browser import CHROMIUM, CHROMIUM_ARGS, playwright_api  # noqa: F401

pytestmark = pytest.mark.slow

SNAP = REPO / "tests" / "fixtures" / "web" / "snapshot_cpu_no_convention.json"


@pytest.fixture(scope="module")
def browser():
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


def _page(browser, snap: dict):
    from trainmeter.views.web.server import serve
    from trainmeter.views.web.state import DashboardState

    state = DashboardState(mode="view", run_dir="/runs/tiny")
    state.on_finish(snap)
    srv = serve(state, 0)
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    page.goto(srv.url)
    page.wait_for_selector('[data-tile="tokens_per_s"][data-value]')
    return srv, page


def _tile_text(page, name: str) -> tuple[str, str]:
    tile = page.locator(f'[data-tile="{name}"]')
    return tile.locator(".value").inner_text(), tile.locator(".sub").inner_text()


def test_flops_tile_shows_the_range_over_conventions_when_none_is_chosen(browser):
    from trainmeter.views.web.server import stop

    snap = json.loads(SNAP.read_text())
    assert snap["flops_per_token"]["value"] is None and "flops_per_token" not in snap["absent"]
    srv, page = _page(browser, snap)
    try:
        value, sub = _tile_text(page, "flops_per_token")
        assert value == "601–748 kFLOP"  # 600,576 (hf) to 748,032 (all_params)
        assert "not measured" not in sub
        assert sub == "no convention chosen: range over hf, megatron, titan, all_params"
    finally:
        page.close()
        stop(srv)


def test_mfu_tile_shows_its_range_when_a_peak_is_known_but_no_convention(browser):
    from trainmeter.views.web.server import stop

    snap = json.loads(SNAP.read_text())
    snap["absent"].pop("mfu")
    snap["mfu"] = {"convention": "not chosen", "n_gpus": 1, "peak": "H100", "range": [0.312, 0.3885]}
    srv, page = _page(browser, snap)
    try:
        value, sub = _tile_text(page, "mfu")
        assert value == "31.2%–38.9%"
        assert sub.startswith("no convention chosen: range over hf")
    finally:
        page.close()
        stop(srv)


def test_time_split_says_checkpoints_and_eval_were_not_measured_not_zero(browser):
    from trainmeter.views.web.server import stop

    srv, page = _page(browser, json.loads(SNAP.read_text()))
    try:
        item = page.locator('#timesplit [data-part="eval"]')
        assert item.inner_text().split("\n")[-1] == (
            "not measured: the model never went to eval() and back to train()"
        )
        assert "0.00 ms" not in page.locator('#timesplit [data-part="checkpoint"]').inner_text()
        assert "ms" in page.locator('#timesplit [data-part="data"]').inner_text()  # timed: a time
    finally:
        page.close()
        stop(srv)


def test_mfu_tile_shows_a_whole_short_reason_and_the_full_one_a_click_away(browser):
    from trainmeter.views.web.server import stop

    snap = json.loads(SNAP.read_text())
    full = snap["absent"]["mfu"]
    assert full.startswith("no dense peak to divide by: the GPU model is unknown (no device")
    srv, page = _page(browser, snap)
    try:
        sub = page.locator('[data-tile="mfu"] .sub')
        assert sub.inner_text() == "no dense peak to divide by: the GPU model is unknown"
        assert sub.get_attribute("title") == full
        assert page.evaluate(  # nothing cut off: the short reason fits inside its tile
            "(() => { const e = document.querySelector('[data-tile=\"mfu\"] .sub');"
            " return e.scrollHeight <= e.clientHeight + 1; })()"
        )
        page.locator('[data-tile="mfu"]').click()
        assert full in page.locator("#explain").inner_text()
    finally:
        page.close()
        stop(srv)


def test_chart_axes_have_round_ticks_in_a_human_unit_and_titles_in_that_unit(browser):
    """RSS rising to 347 MiB: 0/100/200/300 MiB (1, 2 or 5 x 10^k MiB), not 95.4/191/286 MiB;
    step times near 84 ms: ticks in ms under an axis titled in milliseconds, not seconds."""
    from trainmeter.views.web.server import serve, stop
    from trainmeter.views.web.state import DashboardState

    state = DashboardState(mode="view", run_dir="/runs/tiny")
    mib = 1024.0 * 1024.0
    for i in range(40):
        t, step = i * 1.5, i * 15
        state.history.add("host_rss_b", "system", (150 + 5 * i) * mib, step, None, t, "B", "RSS")
        state.history.add("step_time_s", "system", 0.080 + 0.0002 * i, step, None, t, "s", "Step time")
    state.on_finish(json.loads(SNAP.read_text()))
    srv = serve(state, 0)
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    try:
        page.goto(srv.url)
        page.wait_for_selector('[data-chart="host"][data-y-ticks]')
        page.wait_for_selector('[data-chart="step_time"][data-y-ticks]')
        host = page.locator('[data-chart="host"]')
        ticks = host.get_attribute("data-y-ticks").split("|")
        assert ticks[:4] == ["0 MiB", "100 MiB", "200 MiB", "300 MiB"]
        assert host.get_attribute("data-y-title") == "bytes (MiB)"
        step = page.locator('[data-chart="step_time"]')
        ticks = step.get_attribute("data-y-ticks").split("|")
        assert all(t.endswith(" ms") for t in ticks) and len(ticks) >= 2
        values = [float(t[:-3]) for t in ticks]
        gap = values[1] - values[0]
        assert gap in (0.1, 0.2, 0.5, 1.0, 2.0, 5.0) or abs(gap - round(gap)) < 1e-9
        assert all(abs(v / gap - round(v / gap)) < 1e-6 for v in values)  # on multiples
        assert step.get_attribute("data-y-title") == "milliseconds"
    finally:
        page.close()
        stop(srv)
