"""Screenshots for the README, each in the light and the dark theme (docs/img/*-{light,dark}.png).

Runs the example under `tm` on the fake H100 (the NVML fixture the tests use) with a step
budget, waits until the run is past a third of it, and photographs the live page in headless
Chromium (dashboard-*), plus the MFU waterfall with What to try, and the explain panel of MFU.
When the run has finished: `tm view` of it (view-*) and `tm report` of it (report-*); a second,
shorter run beside it, and the two side by side (`tm compare A B --web`, compare-*) and the
runs page (`tm runs --web`, runs-*). Then a CPU-only run (no fake GPU): its live page (cpu-*).

    python scripts/dashboard_screenshots.py [--out docs/img]

Needs Debian's chromium (/usr/bin/chromium) and `pip install playwright` (no browser download).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
STEPS = 600


def _env(gpu: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINMETER_")}
    if gpu:
        env["TRAINMETER_FAKE_NVML"] = str(REPO / "tests/fixtures/nvml/h100_sxm_gpm.json")
    env["PYTHONPATH"] = str(REPO / "src")
    return env


def _start(args: list[str], cwd: Path, gpu: bool) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainmeter", *args],
        cwd=cwd, env=_env(gpu), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    for line in proc.stderr:
        match = re.search(r"(http://127\.0\.0\.1:\d+/)", line)
        if match:
            return proc, match.group(1)
    raise SystemExit("tm printed no dashboard URL")


def _start_run(cwd: Path, gpu: bool = True) -> tuple[subprocess.Popen, str]:
    extra = ["--convention", "megatron"] if gpu else []
    return _start(["--port", "0", "--budget-steps", str(STEPS), *extra,
                   str(REPO / "examples/tiny_gpt.py"), "--steps", str(STEPS)], cwd, gpu)


def _both(page, out: Path, stem: str, ready: str) -> None:
    """The page in the light and then the dark theme (the system setting), full length."""
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        deadline = time.monotonic() + 120
        while not page.evaluate(ready):  # the pages' CSP forbids eval-based waits
            if time.monotonic() > deadline:
                raise SystemExit(f"{stem}: not ready: {ready}")
            page.wait_for_timeout(300)
        page.wait_for_timeout(1200)  # charts redraw with the theme's colours
        page.screenshot(path=str(out / f"{stem}-{scheme}.png"), full_page=True)
        print(out / f"{stem}-{scheme}.png")


def _after(browser, out: Path, cwd: Path, proc: subprocess.Popen) -> None:
    """When the run has finished: `tm view` of it and `tm report` of it, in both themes."""
    proc.wait(timeout=600)
    run = sorted((cwd / ".trainmeter" / "runs").iterdir())[-1]
    view, url = _start(["view", str(run), "--port", "0"], cwd, False)
    try:
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.goto(url)
        _both(page, out, "view", "!!document.querySelector('[data-chart=\"loss\"]')")
        page.close()
    finally:
        view.terminate()
        view.wait(timeout=60)
    report = cwd / "report.html"
    subprocess.run([sys.executable, "-m", "trainmeter", "report", str(run), "-o", str(report)],
                   cwd=cwd, env=_env(False), check=True)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(report.as_uri())
    _both(page, out, "report", "!!document.body.dataset.chartsReady")
    page.close()


def _runs_pages(browser, out: Path, cwd: Path) -> None:
    """A second, shorter run beside the finished one, then `tm compare A B --web` (compare-*)
    and `tm runs --web` (runs-*)."""
    subprocess.run([sys.executable, "-m", "trainmeter", "-q", "--no-web", "--name", "shorter",
                    str(REPO / "examples/tiny_gpt.py"), "--steps", str(STEPS // 2)],
                   cwd=cwd, env=_env(False), check=True)
    runs = sorted((cwd / ".trainmeter" / "runs").iterdir())
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainmeter", "compare", runs[0].name, runs[-1].name, "--web",
         "--port", "0"],
        cwd=cwd, env=_env(False), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        url = re.search(r"(http://127\.0\.0\.1:\d+/\S*)", proc.stderr.readline()).group(1)
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.goto(url)
        _both(page, out, "compare", "!!document.body.dataset.compared")
        page.goto(url.split("compare?")[0])
        _both(page, out, "runs", "!!document.body.dataset.listed")
        page.close()
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def _cpu_only(browser, out: Path, cwd: Path) -> None:
    proc, url = _start_run(cwd, gpu=False)
    try:
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.goto(url)
        _both(page, out, "cpu", "!!document.querySelector('[data-tile=\"tokens_per_s\"][data-value]')"
              " && !!document.querySelector('#host [data-core]') && !!document.querySelector('[data-chart=\"loss\"]')")
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPO / "docs" / "img"))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        proc, url = _start_run(Path(tmp))
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                page = browser.new_page(viewport={"width": 1440, "height": 900})
                page.goto(url)
                deadline = time.monotonic() + 300
                while page.evaluate(
                    "Number(document.querySelector('#p-pct').dataset.value || 0)"
                ) < 0.4:
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise SystemExit("the run did not get far enough")
                    page.wait_for_timeout(500)
                for scheme in ("light", "dark"):
                    page.emulate_media(color_scheme=scheme)
                    page.wait_for_timeout(1200)  # charts redraw with the theme's colours
                    page.screenshot(path=str(out / f"dashboard-{scheme}.png"), full_page=True)
                    print(out / f"dashboard-{scheme}.png")
                # the MFU waterfall and What to try, side by side (light)
                page.emulate_media(color_scheme="light")
                page.wait_for_timeout(1200)
                insight = page.locator("section.grid2", has=page.locator("#waterfall"))
                page.evaluate("document.querySelector('.top').style.position = 'static'")
                insight.screenshot(path=str(out / "dashboard-waterfall.png"))
                page.evaluate("document.querySelector('.top').style.position = ''")
                print(out / "dashboard-waterfall.png")
                if not page.evaluate("!!document.body.dataset.explained"):
                    print("no explanations in this engine's snapshot: no explain screenshot")
                else:
                    page.emulate_media(color_scheme="light")
                    page.locator('[data-tile="mfu"]').click()
                    page.locator("#explain").wait_for(state="visible")
                    page.wait_for_timeout(300)
                    page.screenshot(path=str(out / "dashboard-explain.png"))
                    print(out / "dashboard-explain.png")
                _after(browser, out, Path(tmp), proc)
                _runs_pages(browser, out, Path(tmp))
                with tempfile.TemporaryDirectory() as cpu_tmp:
                    _cpu_only(browser, out, Path(cpu_tmp))
                browser.close()
        finally:
            if proc.poll() is None:
                proc.terminate()
            proc.wait(timeout=60)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
