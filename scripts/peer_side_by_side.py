"""Screens of trainmeter beside the published trainmeter 0.0.7, on the same script at the same time.

The two tools share a package and a command name, so the peer lives in a virtual environment of
its own, outside the repository (made once, by hand):

    python3 -m venv ../peer-venv
    ../peer-venv/bin/pip install trainmeter==0.0.7 torch==2.13.0 numpy

Then, from the repository (this checkout's `src` is what `ours` runs):

    python scripts/peer_side_by_side.py --peer ../peer-venv [--out docs/img]

Both tools run `examples/tiny_gpt.py` at once, each in a tmux pane of the same size (the
terminal each prints to), on CPU (the peer has no fake GPU to point at). At 40% of the steps both
dashboards are photographed at the same viewport within a second of each other, and both
terminals are captured; after the run: the pages again (what a page shows once its run is gone),
the end-of-run terminals, each tool's `view` of its finished run, each one's passport, and
our `tm report` (the peer has no report), and how wide each view is on a 390 px screen. Images
go to `<out>/peer-*.png`, the text to `<out>/peer-*.txt` (docs/side-by-side.md quotes them). The PNGs in docs/img were then reduced
to 256 colours (Pillow's `quantize`) to keep the repository small.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
STEPS = 600
COLS, ROWS = 120, 30
VIEWPORT = {"width": 1440, "height": 900}
URL = re.compile(r"(http://(?:127\.0\.0\.1|localhost|0\.0\.0\.0|\[::1\]):\d+/?)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Pane:
    """One tool's terminal: a tmux pane of COLS x ROWS on a private tmux server."""

    def __init__(self, workdir: Path, env: dict[str, str]) -> None:
        self.socket = f"tmside-{uuid.uuid4().hex[:10]}"
        assigns = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        self._tmux("-f", "/dev/null", "new-session", "-d", "-s", "t", "-x", str(COLS),
                   "-y", str(ROWS), "-c", str(workdir),
                   f"env -i {assigns} TERM=xterm-256color PS1='$ ' bash --norc --noprofile")
        self._tmux("set-option", "-g", "status", "off")

    def _tmux(self, *args: str) -> str:
        out = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True,
                             timeout=10, env={**os.environ, "TMUX": ""})
        return out.stdout

    def type(self, line: str) -> None:
        self._tmux("send-keys", "-t", "t", "-l", line)
        self._tmux("send-keys", "-t", "t", "Enter")

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-t", "t")

    def history(self) -> str:
        return self._tmux("capture-pane", "-p", "-J", "-S", "-2000", "-t", "t")

    def close(self) -> None:
        self._tmux("kill-server")


def _env(python_bin: Path, home: Path, ours: bool) -> dict[str, str]:
    env = {"PATH": f"{python_bin}:/usr/bin:/bin", "HOME": str(home), "OMP_NUM_THREADS": "1"}
    if ours:
        env["PYTHONPATH"] = str(REPO / "src")
    return env


def _wait(what: str, check, timeout: float = 300):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.5)


def _shot(page, path: Path) -> None:
    page.screenshot(path=str(path), full_page=True)
    print(path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer", required=True, help="the peer's virtual environment")
    parser.add_argument("--out", default=str(REPO / "docs" / "img"))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    peer_bin = Path(args.peer) / "bin"
    ours_bin = Path(sys.executable).parent
    if shutil.which("tmux") is None:
        raise SystemExit("needs tmux")
    from playwright.sync_api import sync_playwright

    script = REPO / "examples" / "tiny_gpt.py"
    run_args = f"--budget-steps {STEPS} {script} --steps {STEPS}"
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        dirs = {who: Path(tmp) / who for who in ("ours", "peer")}
        for d in dirs.values():
            d.mkdir()
        panes = {
            "ours": Pane(dirs["ours"], _env(ours_bin, dirs["ours"], ours=True)),
            "peer": Pane(dirs["peer"], _env(peer_bin, dirs["peer"], ours=False)),
        }
        ports = {"ours": free_port(), "peer": free_port()}
        try:
            panes["ours"].type(
                f"python -m trainmeter --port {ports['ours']} {run_args}; echo RUN_$((1+1))_ENDED $?"
            )
            panes["peer"].type(
                f"{peer_bin}/tm --port {ports['peer']} {run_args}; echo RUN_$((1+1))_ENDED $?"
            )
            urls = {
                who: _wait(f"{who}'s dashboard URL",
                           lambda who=who: (m := URL.search(panes[who].history())) and m.group(1))
                for who in panes
            }
            print(urls)
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                pages = {}
                for who, url in urls.items():
                    pages[who] = browser.new_page(viewport=VIEWPORT)
                    pages[who].emulate_media(color_scheme="light")
                    pages[who].goto(url)

                def far_enough() -> bool:
                    return pages["ours"].evaluate(
                        "Number(document.querySelector('#p-pct').dataset.value || 0)") >= 0.4

                _wait("40% of the steps", far_enough, 600)
                time.sleep(1.0)  # a redraw on both
                for who in ("ours", "peer"):  # within a second of each other
                    _shot(pages[who], out / f"peer-live-{who}.png")
                for who in ("ours", "peer"):
                    (out / f"peer-terminal-live-{who}.txt").write_text(panes[who].screen())
                for who in ("ours", "peer"):
                    _wait(
                        f"{who}'s run to end",
                        lambda who=who: "RUN_2_ENDED" in panes[who].screen(),
                        900,
                    )
                time.sleep(3.0)  # what each page says once its run is gone
                for who in ("ours", "peer"):
                    _shot(pages[who], out / f"peer-ended-{who}.png")
                    (out / f"peer-terminal-end-{who}.txt").write_text(panes[who].history())
                # each tool's view of its finished run, and each one's passport
                for who, tm in (("ours", "python -m trainmeter"), ("peer", f"{peer_bin}/tm")):
                    runs = sorted((dirs[who] / ".trainmeter" / "runs").iterdir())
                    run = runs[-1]
                    port = free_port()
                    panes[who].type(f"clear; {tm} passport {run} > passport.txt 2>&1; "
                                    f"{tm} view {run} --port {port}")
                    url = _wait(f"{who}'s view URL",
                                lambda who=who, port=port: (m := re.search(rf"http://\S+:{port}/?",
                                                                           panes[who].history()))
                                and m.group(0))
                    page = browser.new_page(viewport=VIEWPORT)
                    page.emulate_media(color_scheme="light")
                    page.goto(url)
                    page.wait_for_timeout(4000)
                    _shot(page, out / f"peer-view-{who}.png")
                    page.set_viewport_size({"width": 390, "height": 844})  # a phone
                    page.wait_for_timeout(1500)
                    wide = page.evaluate("document.documentElement.scrollWidth")
                    (out / f"peer-narrow-{who}.txt").write_text(f"{wide} px wide at 390 px\n")
                    page.close()
                    panes[who]._tmux("send-keys", "-t", "t", "C-c")
                    passport = dirs[who] / "passport.txt"
                    _wait(f"{who}'s passport", passport.exists, 60)
                    (out / f"peer-passport-{who}.txt").write_text(passport.read_text())
                    if who == "ours":
                        report = dirs[who] / "report.html"
                        subprocess.run([sys.executable, "-m", "trainmeter", "report", str(run),
                                        "-o", str(report)], cwd=dirs[who],
                                       env={**os.environ, "PYTHONPATH": str(REPO / "src")},
                                       check=True)
                        page = browser.new_page(viewport={"width": 1280, "height": 900})
                        page.goto(report.as_uri())
                        page.wait_for_timeout(3000)
                        _shot(page, out / "peer-report-ours.png")
                        page.close()
                browser.close()
        finally:
            for pane in panes.values():
                pane.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
