"""`tm view`: bad input is one line on stderr; a run is served until stopped."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from pathlib import Path

from trainmeter.cli import view

from ..conftest import run_tm


def test_bad_flags_and_missing_runs(tmp_path: Path) -> None:
    bad = run_tm(["view", "--frob"], tmp_path)
    assert bad.returncode == 2 and bad.stderr == "tm view: unknown option '--frob' (tm view --help)\n"
    port = run_tm(["view", "--port", "x"], tmp_path)
    assert port.returncode == 2 and port.stderr.count("\n") == 1 and "--port" in port.stderr
    missing = run_tm(["view", "nope"], tmp_path)
    assert missing.returncode == 1 and missing.stderr.startswith("tm view: no runs under ")
    assert missing.stderr.count("\n") == 1


def _record(kind: str, t: float, d: dict, src: str = "tm") -> str:
    return json.dumps({"v": 1, "t": t, "src": src, "rank": None, "pid": 1, "kind": kind, "d": d})


def test_serves_a_replayed_run_with_its_history(tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    run.mkdir()
    lines = [_record("run.start", 100.0, {"name": "hand", "argv": ["x"]})]
    for n in range(1, 31):  # 30 steps of 1024 tokens, 0.5 s apart, a loss each
        t = 100.0 + n * 0.5
        lines.append(_record("step", t, {"k": 1, "n": n, "tokens": 1024}, "agent"))
        lines.append(_record("metric", t, {"key": "train_loss", "value": 5.0 - n / 10, "step": n}, "emit"))
    lines.append(_record("run.end", 116.0, {"exit_status": 0, "signal": None, "elapsed_s": 16.0}))
    (run / "events.jsonl").write_text("\n".join(lines) + "\n")
    stop = threading.Event()
    rc: list[int] = []
    thread = threading.Thread(target=lambda: rc.append(view.main([str(run), "--port", "0"], stop)))
    thread.start()
    try:
        url = None
        deadline = time.monotonic() + 60  # a deadline, not 200 tries of 50 ms
        while time.monotonic() < deadline:
            err = capsys.readouterr().err
            if "http://" in err:
                url = err.split(" at ")[1].split(" ")[0]
                break
            stop.wait(0.05)
        assert url, "no URL printed"
        with urllib.request.urlopen(url + "api/state", timeout=10) as resp:
            state = json.loads(resp.read())
        assert state["mode"] == "view" and state["finished"] is True
        assert state["snapshot"]["steps"] == 30 and state["snapshot"]["tokens_seen"] == 30 * 1024
        loss = state["history"]["series"]["train_loss"]
        assert loss["step"] == list(range(1, 31))
        assert loss["last"][0] == 4.9 and loss["last"][-1] == 2.0
        assert loss["tokens"][-1] == 30 * 1024
        # snapshots along the replay draw the engine's tokens/s over the run, a second apart
        assert len(state["history"]["series"]["tokens_per_s"]["last"]) >= 5
    finally:
        stop.set()
        thread.join(timeout=10)
    assert rc == [0]
