"""`tm summary` and `tm top` as a user meets them, for a real run of the example model on the H100
fixture (fake NVML: two GPUs with tensor-activity counters and an energy counter),
`--budget-steps 400 --convention megatron`: every number the text shows is checked against
`tm summary --json` of the same run, formatted the way the views format it.

One training run (the example, real torch on CPU, a few seconds) serves the whole module.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from trainmeter.views.format import duration, ms, percent, si, si_unit
from trainmeter.views.terminal import mfu_text

from ..conftest import EXAMPLES, REPO, run_dirs, run_tm, tm_env
from .screen import Screen, needs_tmux, shell_env

FAKE_GPUS = REPO / "tests" / "fixtures" / "nvml" / "h100_sxm_gpm.json"


@pytest.fixture(scope="module")
def example_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cwd = tmp_path_factory.mktemp("example")
    result = run_tm(
        ["-q", "--budget-steps", "400", "--convention", "megatron", str(EXAMPLES / "tiny_gpt.py")],
        cwd,
        env=tm_env(TRAINMETER_FAKE_NVML=str(FAKE_GPUS)),
    )
    assert result.returncode == 0, result.stderr
    return run_dirs(cwd)[-1]


def _summary(run: Path, *args: str, **env: str) -> str:
    result = run_tm(["summary", str(run), *args], run.parent, env=tm_env(**env))
    assert result.returncode == 0, result.stderr
    return result.stdout


def _flat(text: str) -> list[str]:
    return [" ".join(line.split()) for line in text.splitlines()]


def test_summary_text_shows_the_json_values(example_run: Path) -> None:
    snap = json.loads(_summary(example_run, "--json"))
    text = _summary(example_run)
    lines = _flat(text)
    assert "\x1b" not in text  # not a terminal: plain text
    # throughput and MFU with its convention, the peak and its label
    window = snap["rate_window"]
    assert window["kind"] == "steady"
    assert (
        f"tokens/s {si(snap['tokens_per_s'])} steady state, {duration(window['seconds'])} after "
        f"warm-up, counting {snap['tokens_counted']}"
    ) in lines
    spread = snap["step_times"]
    assert any(
        line.startswith("step time ") and f"median {ms(spread['median_s'])}" in line
        and f"p90 {ms(spread['p90_s'])}" in line
        for line in lines
    )
    assert mfu_text(snap) in lines
    # the peak reads by the rule (989.5e12 FLOP/s: three digits from 100 up), as on the page
    assert "peak: 2 × NVIDIA H100 SXM5 80GB, 990 TFLOP/s dense BF16 each (datasheet)" in lines
    # FLOPs per token under every convention, and counted
    for name, value in snap["conventions"].items():
        assert any(line.startswith(f"{name} {si_unit(value, 'FLOP')} ") for line in lines), name
    assert any(line.startswith(f"counted {si_unit(snap['counted']['per_token'], 'FLOP')} ") for line in lines)
    # the ladder, a row a GPU, and OFU
    ladder = snap["ladder"]
    for gpu, row in ladder["gpus"].items():
        cells = [percent(row[k]) for k in ("gpu_util", "sm_active", "tensor_active", "ofu", "mfu")]
        assert f"GPU {gpu} {' '.join(cells)}" in lines, gpu
    assert any(line.startswith(f"OFU {percent(snap['ofu']['value'])} (counters, measured)") for line in lines)
    # energy and joules per token
    energy = snap["energy"]
    assert any(line.startswith(f"{si_unit(energy['joules'], 'J')} (GPU 0 ") and
               line.endswith(f"{si_unit(energy['joules_per_token'], 'J')} per token") for line in lines)
    # budget, progress and ETA
    assert "budget 400 steps (declared) = 410k tokens" in lines  # 400 x 1024
    if "eta_s" in snap:
        assert any(line.endswith(f"{percent(snap['progress'])} ETA {duration(snap['eta_s'])}") for line in lines)
    else:  # a finished run has no ETA: absent with its reason (checked with every absent below)
        assert "eta_s" in snap["absent"]
        assert any(line.endswith(percent(snap["progress"])) for line in lines)
    # the time split and goodput, every alert, every absent number with its reason
    assert f"{duration(snap['time']['elapsed_s'])} elapsed goodput {percent(snap['time']['goodput'])}" in lines
    assert snap["alerts"], "the fixture's GPU 0 is throttled: the engine raises gpu_throttle"
    assert f"Alerts ({len(snap['alerts'])})" in lines
    for alert in snap["alerts"]:
        assert f"! {alert['kind']} {' '.join(alert['message'].split())}" in lines
    absent_text = " ".join(" ".join(lines).split())
    for name, reason in snap["absent"].items():
        assert re.search(rf"(^| |, ){re.escape(name)}(,|:)", absent_text), name
        assert " ".join(reason.split()) in absent_text, name
    assert f"train_loss {snap['series']['train_loss']['value']:.4g} 200 values step 200 emit" in lines


def _in_pty(args: list[str], cwd: Path, **env: str) -> bytes:
    """`tm ARGS` with a pseudo-terminal as its stdout: what a terminal would receive."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 110, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "trainmeter", *args], cwd=cwd,
                            env=tm_env(TERM="xterm-256color", **env), stdin=subprocess.DEVNULL,
                            stdout=slave, stderr=subprocess.PIPE)
    os.close(slave)
    out = bytearray()
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
    return bytes(out)


SGR = re.compile(rb"\x1b\[[0-9;]*m")


def test_summary_in_colour_on_a_terminal_and_plain_with_no_color(example_run: Path) -> None:
    coloured = _in_pty(["summary", str(example_run)], example_run.parent)
    plain = _in_pty(["summary", str(example_run)], example_run.parent, NO_COLOR="1")
    assert SGR.search(coloured)  # styles on a terminal
    assert b"\x1b" not in plain  # NO_COLOR: no escape sequence at all
    # the same words either way
    assert _flat(SGR.sub(b"", coloured).decode()) == _flat(plain.decode())


@needs_tmux
def test_top_shows_a_finished_run_and_quits_on_q(example_run: Path) -> None:
    snap = json.loads(_summary(example_run, "--json"))
    screen = Screen(example_run.parent, cols=120, rows=24)
    try:
        screen.type(f"clear; echo before top; {shell_env()} {sys.executable} -m trainmeter top "
                    f"{example_run}; echo top exited $?")
        lines = screen.wait_for_frame(lambda ls: "finished" in ls[0], what="tm top's title")
        text = "\n".join(lines)
        flat = _flat(text)
        assert "…" not in "".join(lines[1:6]), lines[1:6]  # 120 columns: every tile whole
        # tiles: progress and ETA, tokens/s, MFU and its convention, OFU, loss, goodput, energy
        tiles = " ".join(flat[1:5])
        eta = f"ETA {duration(snap['eta_s'])}" if "eta_s" in snap else percent(snap["progress"])
        for value in (percent(snap["progress"]), eta,
                      si(snap["tokens_per_s"]), percent(snap["mfu"]["value"]), "megatron",
                      percent(snap["ofu"]["value"]), f"{snap['series']['train_loss']['value']:.4g}",
                      percent(snap["time"]["goodput"]), si_unit(snap["energy"]["joules"], "J")):
            assert value in tiles, value
        # the rate's window (a finished run: steady) and memory now (CPU: the resident set)
        from trainmeter.views.memory_text import now_figure

        assert "steady" in tiles and now_figure(snap)[1] in tiles, tiles
        # the sparklines have points, the ladder its rows, the time split its bar, the alerts
        assert any(line.startswith("│ loss ") and any(c in line for c in "▁▂▃▄▅▆▇█") for line in lines)
        assert any("tokens/s ▁" in line or "tokens/s " in line and "█" in line for line in lines)
        row0 = snap["ladder"]["gpus"]["0"]
        assert any(f"│ 0 {percent(row0['gpu_util'])} {percent(row0['sm_active'])} "
                   f"{percent(row0['tensor_active'])} {percent(row0['ofu'])}" in line for line in flat)
        assert "where the time went" in text and "Compute" in text
        assert f"alerts ({len(snap['alerts'])})" in text and snap["alerts"][0]["kind"] in text
        screen.keys("q")
        lines = screen.wait_for(lambda ls: "top exited 0" in ls, what="tm top's exit")
        assert lines[0] == "before top"  # the alternate screen left: the shell's screen is back
        assert not any("utilization ladder" in line for line in lines)
        raw = screen.raw_through(b"top exited 0")  # all top wrote is in the file
        assert raw.rfind(b"\x1b[?1049l") > raw.rfind(b"\x1b[?1049h") > 0
        assert raw.rfind(b"\x1b[?25h") > raw.rfind(b"\x1b[?25l")  # the cursor shown again
    finally:
        screen.close()


@needs_tmux
def test_top_at_80_columns_drops_tiles_and_cuts_no_number(example_run: Path) -> None:
    """80 columns cannot hold the eight tiles: the least wanted are left out, and every tile
    shown is whole, read off the pane (capture-pane) as a person sees it."""
    snap = json.loads(_summary(example_run, "--json"))
    screen = Screen(example_run.parent, cols=80, rows=24)
    try:
        screen.type(f"clear; {shell_env()} {sys.executable} -m trainmeter top {example_run}")
        lines = screen.wait_for_frame(lambda ls: "finished" in ls[0], what="tm top's title")
        tiles = lines[1:6]
        assert all(len(line) <= 80 for line in tiles)
        assert "…" not in "".join(tiles), tiles
        heads = tiles[1].strip("│ ").split()
        assert heads[:3] == ["progress", "tokens/s", "MFU"] and len(heads) < 8, heads
        values = " ".join(tiles[2].split())
        for value in (percent(snap["progress"]), si(snap["tokens_per_s"]),
                      percent(snap["mfu"]["value"])):
            assert value in values, (value, values)
        screen.keys("q")
    finally:
        screen.close()


@needs_tmux
def test_top_gives_the_terminal_back_on_sigterm(example_run: Path) -> None:
    screen = Screen(example_run.parent, cols=100, rows=24)
    try:
        screen.type(f"clear; echo before top; {shell_env()} {sys.executable} -m trainmeter top "
                    f"{example_run}; echo top exited $?")
        screen.wait_for(lambda ls: "finished" in ls[0], what="tm top's title")
        (pid,) = screen.shell_children()
        os.kill(pid, signal.SIGTERM)
        lines = screen.wait_for(lambda ls: "top exited 0" in ls, what="tm top's exit on SIGTERM")
        assert lines[0] == "before top"  # the shell's screen is back
        screen.type("echo keys echo again")  # the keyboard mode was restored: typing shows
        screen.wait_for(lambda ls: any(line.endswith("echo keys echo again") for line in ls))
    finally:
        screen.close()


FOLLOWED = """
import json, os, socket, time
path = os.environ["TRAINMETER_SOCKET"]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
def send(n0, n1):
    t0 = time.monotonic()
    lines = []
    for n in range(n0, n1):
        t = t0 + 0.01 * (n - n0)
        lines.append(json.dumps({"v": 1, "t": t, "src": "agent", "rank": 0, "pid": os.getpid(),
            "kind": "step", "d": {"k": 1, "tokens": 1024, "n": n, "micro": 1}}))
        lines.append(json.dumps({"v": 1, "t": t, "src": "emit", "rank": 0, "pid": os.getpid(),
            "kind": "metric", "d": {"key": "train_loss", "value": 5.0 - 0.1 * n, "via": "emit",
            "step": n}}))
    for i in range(0, len(lines), 10):
        s.sendto("\\n".join(lines[i:i + 10]).encode(), path)
send(1, 11)
while not os.path.exists("more"):
    time.sleep(0.02)
send(11, 31)
while not os.path.exists("go"):
    time.sleep(0.02)
"""


@needs_tmux
def test_top_follows_a_running_run_and_quits_on_ctrl_c(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(FOLLOWED)
    run = subprocess.Popen(
        [sys.executable, "-m", "trainmeter", "-q", "--no-agent", "--budget-steps", "40",
         "--name", "followed", "train.py"],
        cwd=tmp_path, env=tm_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    screen = Screen(tmp_path, cols=100, rows=24)
    try:
        screen.wait_for(lambda _: bool(run_dirs(tmp_path)), what="the run directory")
        screen.type(f"clear; echo before top; {shell_env()} {sys.executable} -m trainmeter top "
                    "followed; echo top exited $?")
        # 10 of 40 steps: 25%, while the run is running
        screen.wait_for(lambda ls: "running" in ls[0] and "25.0%" in ls[3], what="25% running")
        (tmp_path / "more").write_text("")
        # 30 of 40: the screen follows the log as it grows; the loss trail: last 5.0 - 0.1 x 30
        # = 2, between 2 and 5.0 - 0.1 x 1 = 4.9. One whole frame shows both: the log grows a
        # flush at a time, and a flush may end between step 30 and its loss, so a frame may show
        # 75% with the trail of step 29 (2.1) before the next one shows step 30's
        screen.wait_for_frame(
            lambda ls: "75.0%" in ls[3] and any("│ loss " in line and "2 (2..4.9)" in line for line in ls),
            what="75% and the loss trail 2 (2..4.9) after more steps",
        )
        (tmp_path / "go").write_text("")
        run.wait(timeout=60)
        screen.wait_for(lambda ls: "finished" in ls[0], what="finished once run.end is logged")
        screen.keys("C-c")
        lines = screen.wait_for(lambda ls: "top exited 0" in ls, what="tm top's exit on Ctrl-C")
        assert lines[0] == "before top"
        summary = json.loads(run_tm(["summary", "followed", "--json"], tmp_path).stdout)
        assert summary["steps"] == 30 and summary["progress"] == 0.75
    finally:
        screen.close()
        if run.poll() is None:
            run.kill()
            run.wait()


def test_top_prints_once_without_a_terminal(example_run: Path) -> None:
    snap = json.loads(_summary(example_run, "--json"))
    result = run_tm(["top", str(example_run)], example_run.parent)
    assert result.returncode == 0, result.stderr
    assert "finished" in result.stdout.splitlines()[0]
    assert si(snap["tokens_per_s"]) in result.stdout and "\x1b" not in result.stdout
    bad = run_tm(["top", "--nope"], example_run.parent)
    assert bad.returncode == 2 and bad.stderr.startswith("tm top: unknown option")


def test_the_replays_samples_are_the_snapshots_numbers_and_draw_the_same_history(
    example_run: Path,
) -> None:
    """`Engine.sample` (what a replay hands the charts, 2,000 times along a run) leaves out the
    parts no chart draws and the explanations, and keeps some of the facts' answers from one
    sample to the next: on this real run's log (GPUs, a model shape, a convention, a budget,
    the time split), each of its keys equals the whole snapshot's at the same moment, and a
    history fed the samples (only the keys it reads, as a replay gives them) draws exactly
    what one fed the whole snapshots draws."""
    from trainmeter.engine import Engine
    from trainmeter.views.history import History

    records = [json.loads(line) for line in (example_run / "events.jsonl").read_text().splitlines()]
    engine, light, whole = Engine(), History(), History()
    compared = 0
    for i, record in enumerate(records):
        engine.feed(record)
        if i % 5 and i != len(records) - 1:
            continue
        now = record["t"]
        sample, snap = engine.sample(now=now), engine.snapshot(now=now)
        for key, value in sample.items():
            assert snap[key] == value, (i, key)
        light.on_snapshot(engine.sample(now=now, keys=History.reads), now)  # as a replay does
        whole.on_snapshot(snap, now)
        compared += 1
    assert compared > 50
    assert {"mfu", "ofu", "ladder", "energy", "time", "flops_per_token", "progress"} <= set(sample)
    assert "explain" not in sample and "explain" in snap and "mfu" in snap["explain"]
    drawn = light.dump()["series"]
    assert {"mfu", "ofu", "goodput", "tokens_per_s", "power_w"} <= set(drawn)
    assert drawn == whole.dump()["series"]
