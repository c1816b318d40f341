"""Every text element passes WCAG AA contrast, in both themes, on every page a user opens.

A real accessibility engine (axe-core from npm, installed by `scripts/install_system_deps.sh`
from tests/views/a11y/package-lock.json) is injected by Playwright into Debian's headless
Chromium and asked for its `color-contrast` rule: on the live page of a run on the fake H100, on
`tm view` of that run once stopped, on `tm report` of it, and on the live page of a CPU-only run
(no GPU: the GPU cards fold into one note). Each page is checked with the system's light and dark
setting, and with the page's own theme switch, which the page remembers across a reload.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from pathlib import Path

import pytest

from ..conftest import EXAMPLES, REPO, run_dirs, run_tm, tm_env
from .test_web_browser import CHROMIUM, CHROMIUM_ARGS, FAKE_H100, _Proc

AXE = REPO / "tests" / "views" / "a11y" / "node_modules" / "axe-core" / "axe.min.js"

pytestmark = pytest.mark.slow

playwright_api = pytest.importorskip("playwright.sync_api")
if not os.path.exists(CHROMIUM):
    pytest.skip(f"{CHROMIUM} is not installed", allow_module_level=True)
if not AXE.exists():
    pytest.skip("axe-core is not installed: run scripts/install_system_deps.sh", allow_module_level=True)

SCHEMES = ("light", "dark")


@pytest.fixture(scope="module")
def browser():
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


def contrast_violations(page) -> list[str]:
    """axe-core's AA color-contrast violations on the page as it is now, one line each."""
    page.add_script_tag(content=AXE.read_text(encoding="utf-8"))
    return page.evaluate(
        """() => axe.run(document, {runOnly: {type: 'rule', values: ['color-contrast']},
                                   resultTypes: ['violations']})
            .then(r => r.violations.flatMap(v => v.nodes.map(
                n => n.target.join(' ') + ' | ' + (n.any[0] && n.any[0].message))))"""
    )


GLYPH_CONTRAST = """() => {
  const rgb = c => c.match(/[\\d.]+/g).slice(0, 3).map(Number);
  const lum = c => { const v = rgb(c).map(x => { x /= 255; return x <= 0.03928 ? x / 12.92 : Math.pow((x + 0.055) / 1.055, 2.4); });
                     return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2]; };
  return [...document.querySelectorAll('.icon')].filter(e => e.offsetParent).map(e => {
    const s = getComputedStyle(e), a = lum(s.color), b = lum(s.backgroundColor);
    return [e.textContent, (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05)];
  });
}"""


def glyph_contrasts(page) -> list[tuple[str, float]]:
    """(glyph, contrast against its disc) for each alert and note icon shown ("!", "i", "✕")."""
    return [(g, round(c, 2)) for g, c in page.evaluate(GLYPH_CONTRAST)]


def no_sideways_scroll(page) -> tuple[int, int]:
    """(the page's scroll width, its viewport width): equal when nothing scrolls sideways."""
    return tuple(page.evaluate(
        "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"))


def _page(browser, scheme: str):
    # bypass_csp: the pages forbid scripts from anywhere but themselves, axe included
    ctx = browser.new_context(color_scheme=scheme, bypass_csp=True, viewport={"width": 1400, "height": 1000})
    return ctx, ctx.new_page()


def _wait(page, expression: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not page.evaluate(expression):
        assert time.monotonic() < deadline, f"timed out waiting for {expression}"
        page.wait_for_timeout(250)


def _theme(page) -> str:
    return page.evaluate("document.documentElement.dataset.theme || ''")


def _check_dashboard(browser, url: str, ready: str) -> None:
    for scheme in SCHEMES:
        ctx, page = _page(browser, scheme)
        try:
            page.goto(url)
            _wait(page, ready)
            page.wait_for_timeout(600)  # a second update, charts drawn
            assert _theme(page) == scheme  # follows the system
            bad = contrast_violations(page)
            assert bad == [], f"{scheme} ({url}): " + "\n".join(bad)
            glyphs = glyph_contrasts(page)  # axe leaves single glyphs out: measured here
            assert glyphs and all(c >= 4.5 for _, c in glyphs), (scheme, glyphs)
            # the switch picks the other theme, remembered across a reload
            other = "dark" if scheme == "light" else "light"
            page.locator("#theme").select_option(other)
            assert _theme(page) == other
            page.reload()
            _wait(page, ready)
            assert _theme(page) == other and page.locator("#theme").input_value() == other
            page.locator("#theme").select_option("system")
            assert _theme(page) == scheme
        finally:
            ctx.close()


@pytest.fixture(scope="module")
def gpu_run(tmp_path_factory):
    """A live run on the fake H100 (a budget long enough to be live while checked)."""
    cwd = tmp_path_factory.mktemp("a11y-gpu")
    proc = _Proc(
        ["--port", "0", "--budget-steps", "20000", "--convention", "megatron",
         str(EXAMPLES / "tiny_gpt.py"), "--steps", "20000"],
        cwd,
        tm_env(TRAINMETER_FAKE_NVML=str(FAKE_H100)),
    )
    try:
        yield cwd, proc.url(), proc
    finally:
        proc.stop()


LIVE_READY = "!!document.querySelector('[data-tile=\"mfu\"][data-value]') && !!document.querySelector('[data-chart=\"loss\"]')"


def test_live_page_passes_aa_contrast_in_both_themes(browser, gpu_run):
    _, url, _ = gpu_run
    _check_dashboard(browser, url, LIVE_READY)
    for scheme in SCHEMES:  # and with the MFU explanation open, its citation unfolded
        ctx, page = _page(browser, scheme)
        try:
            page.goto(url)
            _wait(page, LIVE_READY)
            page.locator('[data-tile="mfu"]').click()
            page.locator("#explain").wait_for(state="visible")
            page.locator("#explain-body .peak-full summary").click()
            bad = contrast_violations(page)
            assert bad == [], f"explain, {scheme}: " + "\n".join(bad)
        finally:
            ctx.close()


def test_view_and_report_pass_aa_contrast_in_both_themes(browser, gpu_run):
    cwd, url, proc = gpu_run
    deadline = time.monotonic() + 120
    while (json.loads(urllib.request.urlopen(url + "api/state", timeout=10).read())["snapshot"]
           .get("steps") or 0) < 30:  # past warm-up: MFU, charts (when run alone)
        assert time.monotonic() < deadline and proc.proc.poll() is None
        time.sleep(0.5)
    proc.stop()
    (run,) = run_dirs(cwd)
    view = _Proc(["view", str(run), "--port", "0"], cwd, tm_env())
    out = cwd / "report.html"
    assert run_tm(["report", str(run), "-o", str(out)], cwd).returncode == 0
    try:
        view_url = view.url()
        _check_dashboard(browser, view_url, "document.body.dataset.seq && !!document.querySelector('[data-chart]')")
        # a phone's width: nothing scrolls sideways, on tm view and on the report
        ctx = browser.new_context(viewport={"width": 390, "height": 844}, bypass_csp=True)
        page = ctx.new_page()
        try:
            page.goto(view_url)
            _wait(page, "document.body.dataset.seq && !!document.querySelector('[data-chart]')")
            width, viewport = no_sideways_scroll(page)
            assert width <= viewport == 390, ("tm view", width)
            page.goto(out.as_uri())
            _wait(page, "Number(document.body.dataset.chartsReady || 0) > 0")
            width, viewport = no_sideways_scroll(page)
            assert width <= viewport == 390, ("report", width)
        finally:
            ctx.close()
    finally:
        view.stop()
    for scheme in SCHEMES:
        ctx, page = _page(browser, scheme)
        try:
            page.goto(out.as_uri())
            _wait(page, "Number(document.body.dataset.chartsReady || 0) > 0")
            assert page.evaluate("getComputedStyle(document.body).colorScheme") == scheme
            bad = contrast_violations(page)
            assert bad == [], f"report, {scheme}: " + "\n".join(bad)
        finally:
            ctx.close()


def test_cpu_only_page_folds_the_gpu_cards_and_passes_aa_contrast(browser, tmp_path: Path):
    """No GPU at all (no fake NVML): one note says why the GPU numbers are absent and what
    would give them; the host panel shows the CPU per core, memory, disk and network."""
    proc = _Proc(
        ["--port", "0", "--budget-steps", "20000", str(EXAMPLES / "tiny_gpt.py"), "--steps", "20000"],
        tmp_path,
        tm_env(),  # this machine has no NVIDIA driver: a CPU-only run
    )
    try:
        url = proc.url()
        ready = "!!document.querySelector('[data-tile=\"tokens_per_s\"][data-value]') && !!document.querySelector('#host [data-core]')"
        _check_dashboard(browser, url, ready)
        ctx, page = _page(browser, "light")
        try:
            page.goto(url)
            _wait(page, ready)
            note = page.locator("#no-gpu")
            assert note.is_visible()
            text = note.inner_text()
            assert "GPU" in text and "would" in text
            for card in ("#ladder-card", "#gpus-card", "#waterfall-card"):
                assert not page.locator(card).is_visible(), card
            # a long reason stays inside its tile
            spill = page.evaluate(
                "[...document.querySelectorAll('.tile')].filter(t => t.scrollHeight > t.clientHeight + 1"
                " || t.scrollWidth > t.clientWidth + 1).map(t => t.dataset.tile)"
            )
            assert spill == []
            # the numbers NVML would give are absent for one reason: one row names them all
            row = page.locator('#absent li[data-absent~="ofu"]')
            assert {"ofu", "energy", "flops_observed", "mfu_ofu_gap"} <= set(row.get_attribute("data-absent").split())
            assert row.inner_text().count("NVML library not found") == 1
            host = page.locator("#host").inner_text()
            for word in ("CPU", "Memory", "Disk", "Network"):
                assert word in host, host
            page.set_viewport_size({"width": 390, "height": 844})  # a phone: no sideways scroll
            # the charts take the new width a moment after (the page's resize timer, 150 ms):
            # until they have, not a fixed second, which a loaded box's renderer can outlast
            deadline = time.monotonic() + 30
            width, viewport = no_sideways_scroll(page)
            while width > viewport and time.monotonic() < deadline:
                page.wait_for_timeout(100)
                width, viewport = no_sideways_scroll(page)
            wide = page.evaluate("""() => [...document.querySelectorAll('body *')].filter(e =>
                e.getBoundingClientRect().right > document.documentElement.clientWidth + 1
                && !e.closest('.table-wrap')).slice(0, 8).map(e => e.tagName + '.' + e.className + ' in ' + e.parentElement.className + ': ' + e.textContent.slice(0, 60))""")
            assert width <= viewport == 390, (width, wide)  # was 441: the absent list's reasons
        finally:
            ctx.close()
    finally:
        proc.stop()
