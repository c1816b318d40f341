"""The runs page's replays (`views/web/runs_site.RunsSite`), without a browser: a run is replayed
once however many requests ask for it at the same moment."""

from __future__ import annotations

import json
import threading
import time

from trainmeter import records
from trainmeter.views.web import replay as web_replay
from trainmeter.views.web.runs_site import RunsSite


def _run(root, name: str, steps: int = 20):
    run_dir = root / name
    run_dir.mkdir(parents=True)
    lines = []
    for n in range(1, steps + 1):
        t = 10.0 + n
        lines.append(records.encode(records.make(
            "step", {"k": 1, "n": n, "tokens": 512, "micro": 1}, t=t, src="agent", rank=0, pid=7)))
        lines.append(records.encode(records.make(
            "metric", {"key": "train_loss", "value": 4.0 / n, "via": "emit", "step": n},
            t=t, src="emit", rank=0, pid=7)))
    (run_dir / "events.jsonl").write_text("".join(line if line.endswith("\n") else line + "\n"
                                                  for line in lines))
    return run_dir


def test_requests_for_a_run_being_replayed_wait_for_that_one_replay(tmp_path, monkeypatch):
    """Each request started its own replay until the first was kept: a page's state, events and
    series asked together (or a few tabs) replayed a long log several times over at once."""
    _run(tmp_path, "20260101-000000-a")
    real = web_replay.replay_with_history
    calls = []

    def slow(path):
        calls.append(path)
        time.sleep(0.3)  # a long log: the other requests arrive while this one replays
        return real(path)

    monkeypatch.setattr(web_replay, "replay_with_history", slow)
    site = RunsSite(tmp_path)
    name = "20260101-000000-a"
    states: list[bytes | None] = []
    series: list[bytes | None] = []
    askers = [threading.Thread(target=lambda: states.append(site.state(name))) for _ in range(4)]
    askers.append(threading.Thread(target=lambda: series.append(site.series(name))))
    for asker in askers:
        asker.start()
    for asker in askers:
        asker.join(10)
    assert len(calls) == 1
    assert len(states) == 4 and len(set(states)) == 1 and states[0]
    assert json.loads(series[0])["dir"] == name
    assert site.state("nope") is None and len(calls) == 1


def test_replays_of_different_runs_run_at_most_two_at_once(tmp_path, monkeypatch):
    """Each request for a run not kept yet started its replay on its own thread at once: a
    page asking for many runs' series held that many replays in memory together."""
    names = [f"20260101-00000{i}-r" for i in range(6)]
    for name in names:
        _run(tmp_path, name, steps=3)
    real = web_replay.replay_with_history
    lock = threading.Lock()
    running = [0]
    most = [0]

    def counted(path):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        try:
            time.sleep(0.15)  # long enough for every asker to be waiting
            return real(path)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(web_replay, "replay_with_history", counted)
    site = RunsSite(tmp_path)
    got: dict[str, bytes | None] = {}
    askers = [threading.Thread(target=lambda n=n: got.__setitem__(n, site.series(n))) for n in names]
    for asker in askers:
        asker.start()
    for asker in askers:
        asker.join(20)
    assert 1 <= most[0] <= 2  # (6 before: every run replayed together)
    assert sorted(got) == names and all(json.loads(got[n])["dir"] == n for n in names)
