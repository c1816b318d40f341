"""The live loop and the recorder: samples, watcher facts, drop counts, alerts, order."""

from __future__ import annotations

import io
import json
from pathlib import Path

from trainmeter import payloads, records
from trainmeter.runlog.recorder import Recorder
from trainmeter.runlog.store import RunStore
from trainmeter.runlog.warn import WarnOnce
from trainmeter.supervisor.live import LiveLoop

from .fakes import FakeEngine, FakeSampler, FakeWatcher
from .procs import step_record


def _recorder(tmp_path: Path, stderr: io.StringIO) -> tuple[Recorder, RunStore]:
    warn = WarnOnce(stderr)
    store = RunStore.create("live", warn, root=tmp_path)
    return Recorder(store, warn), store


def _log(store: RunStore) -> list[dict]:
    store.flush()
    return [json.loads(x) for x in (store.path / "events.jsonl").read_text().splitlines()]


def test_a_tick_samples_watches_counts_drops_and_raises_new_alerts_once(tmp_path: Path) -> None:
    stderr = io.StringIO()
    recorder, store = _recorder(tmp_path, stderr)
    alert = {"kind": "data_starved", "message": "data wait is 40% of step time", "from": "phase"}
    engine = FakeEngine(alerts=[alert])
    recorder.attach_engine(engine)
    dropped = [0]
    gpu, host = FakeSampler("sample.gpu"), FakeSampler("sample.host")
    watcher = FakeWatcher()
    live = LiveLoop(
        recorder, WarnOnce(stderr), samplers=[gpu, host], watcher=watcher,
        tree=lambda: [100, 101], dropped=lambda: dropped[0],
    )
    hello = {**step_record(1, 1.0), "kind": "hello", "pid": 100}
    recorder.accept(records.encode(hello).encode(), hello)
    live.tick()
    dropped[0] = 3
    live.tick()
    live.tick()  # same alert, same count: nothing new
    log = _log(store)
    kinds = [e["kind"] for e in log]
    assert kinds == [
        "hello",
        "sample.gpu", "sample.host", "fact", "alert",  # tick 1: observe_only for pid 101
        "sample.gpu", "sample.host", "fact",  # tick 2: ingest_dropped 3
        "sample.gpu", "sample.host",  # tick 3
    ]
    assert log[1]["src"] == "tm" and log[1]["rank"] is None and log[1]["d"] == {"selected": 1}
    assert log[3]["d"] == {"key": "observe_only", "value": "pid 101 has no agent",
                           "source": "detected"}
    assert log[4]["d"] == alert
    assert log[7]["d"]["key"] == "ingest_dropped" and log[7]["d"]["value"] == 3
    assert watcher.calls[0] == ([100, 101], {100})
    # the engine saw exactly what the log holds, in order
    assert [r["kind"] for r in engine.fed] == kinds
    assert stderr.getvalue() == "trainmeter: observe only: pid 101 has no agent\n"  # said once


def test_failing_sampler_and_watcher_are_switched_off_with_one_warning(tmp_path: Path) -> None:
    stderr = io.StringIO()
    recorder, store = _recorder(tmp_path, stderr)
    recorder.attach_engine(FakeEngine())
    bad, good = FakeSampler("sample.gpu", fail=True), FakeSampler("sample.node")
    live = LiveLoop(recorder, WarnOnce(stderr), samplers=[bad, good], watcher=FakeWatcher(True))
    for _ in range(3):
        live.tick()
    assert bad.calls == 1 and good.calls == 3
    assert [e["kind"] for e in _log(store)] == ["sample.node"] * 3
    lines = stderr.getvalue().splitlines()
    assert len(lines) == 2
    assert "sample.gpu sampler failed" in lines[0] and "watcher failed" in lines[1]


def test_records_before_the_engine_are_fed_when_it_attaches(tmp_path: Path) -> None:
    recorder, store = _recorder(tmp_path, io.StringIO())
    recorder.write_tm(payloads.KINDS["run.start"], {"argv": ["x"]}, t=1.0)
    recorder.write_tm(payloads.KINDS["fact"], {"key": "dp", "value": 2, "source": "declared"}, t=2.0)
    engine = FakeEngine()
    assert recorder.attach_engine(engine) is True
    assert recorder.attach_engine(FakeEngine()) is False  # a second engine would miss records
    recorder.write_tm(payloads.KINDS["run.end"], {"exit_status": 0}, t=3.0)
    recorder.seal()
    recorder.write_tm(payloads.KINDS["sample.host"], {"procs": 1}, t=4.0)  # after run.end: not written
    assert [r["kind"] for r in engine.fed] == ["run.start", "fact", "run.end"]
    assert [e["kind"] for e in _log(store)] == ["run.start", "fact", "run.end"]


def test_tm_records_reach_the_engine_as_a_replay_parses_them(tmp_path: Path) -> None:
    recorder, _ = _recorder(tmp_path, io.StringIO())
    engine = FakeEngine()
    recorder.attach_engine(engine)
    recorder.write_tm(payloads.KINDS["sample.node"], {"load": (1.0, 2.0, 3.0)}, t=5.0)
    assert engine.fed[0]["d"]["load"] == [1.0, 2.0, 3.0]  # a tuple comes back as a list


def test_the_loop_thread_ticks_and_stops(tmp_path: Path) -> None:
    recorder, store = _recorder(tmp_path, io.StringIO())
    recorder.attach_engine(FakeEngine())
    sampler = FakeSampler("sample.host")
    set_up: list[bool] = []
    live = LiveLoop(
        recorder, WarnOnce(io.StringIO()), interval=0.02,
        setup=lambda loop: (set_up.append(True), loop.samplers.append(sampler)),
    )
    live.start()
    import time

    deadline = time.monotonic() + 60
    while sampler.calls < 3:
        assert time.monotonic() < deadline, "the loop thread did not tick 3 times"
        time.sleep(0.01)
    assert live.stop() is True
    calls = sampler.calls
    time.sleep(0.1)
    assert sampler.calls == calls >= 3 and set_up == [True]
    assert (store.path / "events.jsonl").read_text().count("sample.host") == calls  # flushed
