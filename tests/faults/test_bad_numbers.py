"""Numbers that cannot be true are not believed, and no number a run shows is infinite
(issue 22, items 9 and 10).

Before: one forged step record with `t` before `run.start` made goodput 53,526% and a 5 s
run's compute 44 min; `k=1.5` and `tokens=2.5` were taken; a line with `t=1e300` made goodput
9.8e299%; `--samples-per-step 1e400` broke the snapshot and `--flops-per-sample 1e308` made
`summary.json` unwritable; one `sample.host` line with `cpu_s=1e308` crashed `tm summary --json`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from trainmeter.runlog.decode import Decoder

from ..conftest import read_events, run_dirs, run_tm

SENDER = """
import json, os, socket, sys, time
path = os.environ["TRAINMETER_SOCKET"]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
def send(kind, d, t=None):
    rec = {"v": 1, "t": time.monotonic() if t is None else t, "src": "agent", "rank": 0,
           "pid": os.getpid(), "kind": kind, "d": d}
    s.sendto(json.dumps(rec).encode(), path)
now = time.monotonic()
send("step", {"k": 1, "tokens": 1024, "n": 1, "micro": 1}, t=now - 3000.0)  # before run.start
send("step", {"k": 1.5, "tokens": 1024, "n": 2, "micro": 1})  # half a step
send("step", {"k": 1, "tokens": 2.5, "n": 3, "micro": 1})  # half a token
send("step", {"k": 1, "tokens": 1024, "n": 4, "micro": 1}, t=1e300)  # after any run
for n in range(1, 21):
    send("step", {"k": 1, "tokens": 1024, "n": n, "micro": 1})
    time.sleep(0.01)
"""


def _finite_everywhere(value: object, path: str = "") -> list[str]:
    if isinstance(value, float):
        return [] if math.isfinite(value) else [path]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _finite_everywhere(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _finite_everywhere(v, f"{path}[{i}]")]
    return []


def _time(summary: dict) -> dict:
    return summary.get("time") or {}


def test_forged_steps_live_are_skipped_and_goodput_stays_a_share(tmp_path: Path) -> None:
    (tmp_path / "s.py").write_text(SENDER)
    out = run_tm(["-q", "--no-web", "s.py"], tmp_path)
    assert out.returncode == 0, out.stderr
    run = run_dirs(tmp_path)[-1]
    steps = [e for e in read_events(run) if e["kind"] == "step"]
    assert len(steps) == 20  # the four forged ones never reach the log
    summary = json.loads((run / "summary.json").read_text())
    split = _time(summary)
    assert 0 <= split["goodput"] <= 1.0
    compute = next(p for p in split["parts"] if p["name"] == "compute")
    assert compute["s"] <= split["elapsed_s"]


def test_a_forged_log_replays_within_the_run(tmp_path: Path) -> None:
    """The same forgeries written into the log itself, and a host sample of 1e308 CPU s."""
    (tmp_path / "s.py").write_text(SENDER.replace('send("step", {"k": 1, "tokens": 1024, "n": 1', '#'))
    assert run_tm(["-q", "--no-web", "s.py"], tmp_path).returncode == 0
    run = run_dirs(tmp_path)[-1]
    lines = (run / "events.jsonl").read_text().splitlines()
    start = json.loads(lines[0])
    t0, pid = start["t"], start["pid"]

    def rec(kind: str, d: dict, t: float) -> str:
        return json.dumps({"v": 1, "t": t, "src": "agent", "rank": 0, "pid": pid, "kind": kind, "d": d})

    forged = [
        rec("step", {"k": 1, "tokens": 1024, "n": 1, "micro": 1}, t0 - 3000.0),
        rec("step", {"k": 1.5, "tokens": 1024, "n": 1, "micro": 1}, t0 + 0.1),
        rec("step", {"k": 1, "tokens": 2.5, "n": 1, "micro": 1}, t0 + 0.1),
        rec("step", {"k": 1, "tokens": 1024, "n": 1, "micro": 1}, 1e300),
        json.dumps({"v": 1, "t": t0 + 0.2, "src": "tm", "rank": None, "pid": pid,
                    "kind": "sample.host", "d": {"procs": 1, "pids": [1], "cpu_s": 1e308, "rss_kb": 1}}),
        json.dumps({"v": 1, "t": t0 + 0.3, "src": "tm", "rank": None, "pid": pid,
                    "kind": "sample.host", "d": {"procs": 1, "pids": [1], "cpu_s": 0.0, "rss_kb": 1}}),
    ]
    (run / "events.jsonl").write_text("\n".join([lines[0], *forged, *lines[1:]]) + "\n")
    out = run_tm(["summary", "--json", str(run)], tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    snap = json.loads(out.stdout)
    assert _finite_everywhere(snap) == []
    split = _time(snap)
    assert 0 <= split["goodput"] <= 1.0
    compute = next(p for p in split["parts"] if p["name"] == "compute")
    assert compute["s"] <= split["elapsed_s"]
    reasons = snap["log"]["reasons"]
    assert reasons.get("implausible step") == 4, reasons


@pytest.mark.parametrize(
    "flags",
    [
        ["--samples-per-step", "1e400"],
        ["--samples-per-step", "1e13"],
        ["--flops-per-sample", "1e308", "--samples-per-step", "100"],
    ],
)
def test_unbounded_flags_are_refused_with_their_range(tmp_path: Path, flags: list[str]) -> None:
    (tmp_path / "t.py").write_text("pass\n")
    out = run_tm(["-q", *flags, "t.py"], tmp_path)
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert "out of range" in out.stderr
    assert not (tmp_path / ".trainmeter").exists()


def test_counts_must_be_whole_and_times_in_the_run() -> None:
    decoder = Decoder()

    def line(kind: str, d: dict, t: float) -> bytes:
        return json.dumps({"v": 1, "t": t, "src": "agent", "rank": 0, "pid": 7, "kind": kind, "d": d}).encode()

    start = json.dumps({"v": 1, "t": 100.0, "src": "tm", "rank": None, "pid": 1,
                        "kind": "run.start", "d": {"name": "x"}}).encode()
    good = [line("step", {"k": 1, "tokens": 8, "n": n, "micro": 1}, 100.0 + n) for n in range(1, 300)]
    bad = [
        line("step", {"k": 1.5, "tokens": 8, "n": 1, "micro": 1}, 101.0),
        line("step", {"k": 1, "tokens": 8.5, "n": 1, "micro": 1}, 101.0),
        line("step", {"k": 1, "tokens": 8, "n": 1, "micro": 1}, 50.0),
        line("step", {"k": 1, "tokens": 8, "n": 1, "micro": 1}, 1e300),
        line("metric", {"key": "loss", "value": 1.0}, 1e300),
    ]
    taken = decoder.many([start, *bad, *good])  # enough lines for the fast path as well
    assert len(taken) == 1 + len(good)
    assert decoder.reasons == {"implausible step": 4, "implausible metric": 1}
