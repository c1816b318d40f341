"""`tm check --baseline`: the runs' steady-state rates compared with a noise band from their own
per-step times.

Synthetic runs draw each step's time from one distribution: 0.1 s x lognormal(0, 0.35), and
3% of the steps held up 4x (a busy machine). Two runs from it must pass a 5% drop for at least
95 of 100 seeds; a run 20% slower (every step x 1.2) must fail for at least 95 of 100. The 100
seeds go through the comparison `tm check` makes (its decision code, on snapshots holding the
blocks the engine keeps); a few whole logs go through `tm check` itself.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from tests.engine.build import end, hello, start, step
from trainmeter.cli import check
from trainmeter.cli.main import main as tm
from trainmeter.engine import noise
from trainmeter.engine.rate import RateWindow

TOKENS = 1000.0


def durations(seed: int, scale: float = 1.0, n: int = 1000) -> list[float]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        d = 0.1 * rng.lognormvariate(0.0, 0.35) * scale
        if rng.random() < 0.03:
            d *= 4
        out.append(d)
    return out


def snapshot_of(steps: list[float]) -> dict:
    """What the engine keeps of a finished run: its steady rates and blocks."""
    window = RateWindow()
    t = 0.0
    window.add(t, 1, TOKENS)
    for d in steps:
        t += d
        window.add(t, 1, TOKENS)
    steady = window.steady()
    assert steady is not None
    return {
        "tokens_per_s": steady.rate(steady.tokens),
        "step_time_s": steady.step_time(),
        "step_times": window.spread(),
        "absent": {"mfu": "no dense peak: no GPU"},
    }


def tokens_line(run: dict, base: dict) -> dict:
    lines = check.checks(run, {"--max-drop": 0.05}, base)
    return next(x for x in lines if x["name"] == "tokens/s vs baseline")


def test_runs_from_one_distribution_pass_and_a_20_percent_slower_one_fails():
    same = slower = 0
    for seed in range(100):
        base = snapshot_of(durations(2 * seed))
        same += tokens_line(snapshot_of(durations(2 * seed + 1)), base)["held"]
        slower += not tokens_line(snapshot_of(durations(2 * seed + 1, 1.2)), base)["held"]
    assert same >= 95 and slower >= 95, (same, slower)


def test_the_band_is_the_spread_of_a_rerun():
    # identical steps: no noise; a run against itself: change 0, holds however noisy
    flat = snapshot_of([0.1] * 200)
    band = noise.compare(flat["step_times"]["blocks"], flat["step_times"]["blocks"], "tokens_per_s")
    assert band is not None and band.change == 0 and band.noise == pytest.approx(0, abs=1e-12)
    noisy = snapshot_of(durations(5))
    line = tokens_line(noisy, noisy)
    assert line["held"] and "within noise" in line["text"] and line["change"] == 0
    # the same seed twice gives the same band (a fixed seed): the same logs, the same answer
    other = snapshot_of(durations(6))
    assert tokens_line(other, noisy)["noise"] == tokens_line(other, noisy)["noise"] > 0


def write_log(root: Path, name: str, steps: list[float]) -> Path:
    run_dir = root / name
    run_dir.mkdir()
    t = 1.0
    recs = [start(0.0), hello(0.1), step(t, TOKENS)]
    for d in steps:
        t += d
        recs.append(step(t, TOKENS))
    recs.append(end(t + 0.5))
    (run_dir / "events.jsonl").write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    return run_dir


def test_tm_check_on_logs(tmp_path, capsys):
    base = write_log(tmp_path, "base", durations(1, n=400))
    again = write_log(tmp_path, "again", durations(2, n=400))
    slow = write_log(tmp_path, "slow", durations(3, 1.25, n=400))
    # the same program again: within noise, and MFU (no GPU in either) is not compared
    assert tm(["check", str(again), "--baseline", str(base), "--max-drop", "5%"]) == 0
    out = capsys.readouterr().out
    tokens = next(x for x in out.splitlines() if "tokens/s" in x)
    assert tokens.startswith("ok") and "noise ±" in tokens, out
    mfu = next(x for x in out.splitlines() if "MFU" in x)
    assert mfu.startswith("ok") and "not compared, absent from both" in mfu
    # 25% longer steps: regressed by about 20%, beyond the noise
    assert tm(["check", str(slow), "--baseline", str(base), "--max-drop", "5%"]) == 1
    out = capsys.readouterr().out
    tokens = next(x for x in out.splitlines() if "tokens/s" in x)
    assert tokens.startswith("FAIL") and "regressed by" in tokens and "(noise ±" in tokens
    # a run against itself always passes, even with almost no drop allowed
    assert tm(["check", str(slow), "--baseline", str(slow), "--max-drop", "0.1%"]) == 0
    capsys.readouterr()


def test_a_number_absent_from_one_run_fails_saying_which(tmp_path, capsys):
    base = write_log(tmp_path, "base", durations(1, n=50))
    # a run whose agent never spoke: no steps, no tokens/s, with the reason
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "events.jsonl").write_text(json.dumps(start(0.0)) + "\n" + json.dumps(end(5.0)) + "\n")
    assert tm(["check", str(bare), "--baseline", str(base), "--max-drop", "5%", "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    line = next(c for c in doc["checks"] if c["name"] == "tokens/s vs baseline")
    assert not line["held"] and "absent from the run" in line["text"]
    assert "no agent" in line["text"] and "the baseline has" in line["text"]


def test_a_run_still_going_is_compared_on_its_steady_state_not_its_last_30_s():
    from tests.engine.build import run

    # 100 steps of 0.5 s, then 100 of 0.2 s; no run.end: the snapshot shows the last 30 s
    t, recs = 1.0, [start(0.0), hello(0.1), step(1.0, TOKENS)]
    for d in [0.5] * 100 + [0.2] * 100:
        t += d
        recs.append(step(t, TOKENS))
    snap = run(recs, now=t)
    assert snap["rate_window"]["kind"] == "trailing"
    # steady: intervals 4..200 = 97 x 0.5 + 100 x 0.2 = 68.5 s for 197 steps
    steady = 197 * TOKENS / 68.5
    line = tokens_line(snap, snap)
    assert line["value"] == pytest.approx(steady, rel=1e-9)
    assert snap["tokens_per_s"] != pytest.approx(steady, rel=1e-3)
