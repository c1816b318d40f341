"""Replay: streams the log, survives a crash's truncated log, equals the live snapshot."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from trainmeter import records
from trainmeter.cli.args import parse_run_args
from trainmeter.runlog.replay import replay
from trainmeter.runlog.runs import RunNotFound, resolve_run
from trainmeter.supervisor.session import supervise

from ..conftest import run_dirs
from .fakes import FakeEngine, FakeSampler
from .procs import SENDER, step_record, write_script


def _write_log(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def _start(t: float) -> dict:
    return records.make("run.start", {"argv": ["x"]}, t=t, src="tm")


def test_a_log_cut_short_by_a_crash_still_replays(tmp_path: Path) -> None:
    lines = [records.encode(_start(0.0))]
    lines += [records.encode(step_record(n, 1.0 + n, tokens=100)) for n in range(5)]
    text = "\n".join(lines) + "\n" + records.encode(step_record(5, 7.0))[:30]  # no newline
    events = tmp_path / "events.jsonl"
    events.write_text(text)
    result = replay(events, engine_factory=FakeEngine)
    assert result.records == 6 and result.bad == 1 and result.lines == 7
    assert result.bad_reasons == {"not JSON": 1}
    assert result.finished is False
    assert result.snapshot["tokens_seen"] == 500  # 5 steps x 100 tokens
    assert result.snapshot["kinds"] == {"run.start": 1, "step": 5}


def test_bad_lines_in_the_middle_are_skipped_and_counted(tmp_path: Path) -> None:
    events = _write_log(
        tmp_path / "events.jsonl",
        [
            records.encode(_start(0.0)),
            "garbage",
            '{"v": 1, "t": 1, "kind": "teleport", "d": {}}',
            "",
            records.encode(step_record(1, 2.0, tokens=7)),
            records.encode(records.make("run.end", {"exit_status": 0}, t=3.0, src="tm")),
        ],
    )
    result = replay(events, engine_factory=FakeEngine)
    assert result.bad == 2 and result.records == 3 and result.finished
    assert result.bad_reasons == {"not JSON": 1, "unknown kind 'teleport'": 1}
    assert result.snapshot["tokens_seen"] == 7


def test_replay_memory_stays_flat_however_long_the_log(tmp_path: Path) -> None:
    """40k step records (about 5 MB of log): replay's peak allocation stays far below the log's
    size, because lines are read and dropped one at a time. The engine here keeps nothing."""

    class Counting:
        n = 0

        def feed(self, record: dict) -> None:
            Counting.n += 1

        def snapshot(self, now=None) -> dict:
            return {"n": Counting.n}

    events = tmp_path / "events.jsonl"
    with open(events, "w") as fh:
        for n in range(40_000):
            fh.write(records.encode(step_record(n, float(n))) + "\n")
    size = events.stat().st_size
    assert size > 4_000_000
    tracemalloc.start()
    result = replay(events, engine_factory=Counting)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert result.snapshot["n"] == 40_000
    assert result.snapshot["log"] == {"lines": 40_000, "records": 40_000, "skipped": 0, "reasons": {}}
    assert peak < size / 10, f"peak {peak} bytes for a {size} byte log"


def test_replay_of_a_supervised_run_equals_its_summary_json(tmp_path: Path, monkeypatch) -> None:
    """The live run's final snapshot comes from exactly the logged records, in order: a replay
    through a fresh engine gives the same snapshot (an order-sensitive digest of every record)."""
    monkeypatch.chdir(tmp_path)
    write_script(tmp_path / "train.py", SENDER)
    opts = parse_run_args(["-q", "--no-agent", "--dp", "2", "train.py"])
    stderr = io.StringIO()
    status = supervise(
        opts,
        engine_factory=FakeEngine,
        samplers_factory=lambda pid, run_dir: [FakeSampler("sample.host", {"pid": pid})],
        watcher=object(),  # not None: the real watcher is not loaded; a broken one is guarded
        interval=0.02,
        stderr=stderr,
    )
    assert status == 0
    [run] = run_dirs(tmp_path)
    live = json.loads((run / "summary.json").read_text())
    assert live["kinds"]["step"] == 20 and live["kinds"]["run.end"] == 1
    replayed = replay(run / "events.jsonl", engine_factory=FakeEngine)
    assert replayed.bad == 0 and replayed.finished
    assert json.loads(json.dumps(replayed.snapshot)) == live


def test_resolve_run_by_path_name_prefix_and_latest(tmp_path: Path) -> None:
    root = tmp_path / ".trainmeter" / "runs"
    for name in ("20261201-100000-gpt", "20261202-090000-bert", "20261202-100000-gpt"):
        (root / name).mkdir(parents=True)
        (root / name / "events.jsonl").write_text("")
    assert resolve_run(None, tmp_path).name == "20261202-100000-gpt"  # latest
    assert resolve_run("gpt", tmp_path).name == "20261202-100000-gpt"  # latest of that name
    assert resolve_run("be", tmp_path).name == "20261202-090000-bert"  # name prefix
    assert resolve_run("20261201", tmp_path).name == "20261201-100000-gpt"  # time prefix
    assert resolve_run(str(root / "20261201-100000-gpt"), tmp_path).name.endswith("gpt")
    try:
        resolve_run("t5", tmp_path)
    except RunNotFound as exc:
        assert "no run matches 't5'" in str(exc)
    else:
        raise AssertionError("t5 should not match")


@pytest.mark.slow
def test_a_full_replay_loads_no_module_it_does_not_use(tmp_path: Path) -> None:
    """A replay of the whole log (no checkpoint: `resume=False`, as an export or a view paced
    otherwise) writes nothing and hashes nothing: hashlib, pickle, the checkpoint, the run
    directory's name makers and importlib.resources (the spec table is read beside its module)
    stay unloaded, each a few milliseconds of the replay's start; so does typing_extensions,
    which msgspec would import (`typed._import_msgspec`), and which imports as ever after it.
    One fresh interpreter."""
    events = tmp_path / "events.jsonl"
    gpu = {"gpus": [{"index": 0, "uuid": "GPU-0", "name": "NVIDIA H100 80GB HBM3"}]}
    lines = [
        records.make("run.start", {"argv": ["x"]}, t=1.0, src="tm"),
        records.make("sample.gpu", gpu, t=2.0, src="tm"),
        records.make("step", {"k": 1, "tokens": 8}, t=3.0, src="agent", rank=0, pid=5),
        records.make("run.end", {"exit_status": 0}, t=4.0, src="tm"),
    ]
    events.write_text("".join(records.encode(r) + "\n" for r in lines))
    code = (
        "import sys\nfrom pathlib import Path\nfrom trainmeter.runlog.replay import replay\n"
        f"r = replay(Path({str(events)!r}), resume=False)\n"
        "assert r.records == 4 and r.snapshot['peak']['key'] == 'h100_sxm', r.snapshot\n"
        "print(' '.join(sorted(m for m in ('hashlib', 'pickle', 'hmac', 'secrets', 'zipfile',"
        " 'importlib.resources', 'trainmeter.runlog.checkpoint', 'tempfile', 'typing_extensions')"
        " if m in sys.modules)))\n"
        "import typing_extensions\nassert typing_extensions.TypedDict and typing_extensions.Buffer\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""


def test_a_replays_samples_carry_what_their_readers_read(tmp_path: Path) -> None:
    """Observers that say which snapshot keys they read (`reads`) are handed samples of those
    keys only (the others are not composed); one that does not say gets every key."""
    from trainmeter.views.history import History

    class Reader:
        def __init__(self, reads: frozenset[str] | None) -> None:
            if reads is not None:
                self.reads = reads
            self.seen: list[set[str]] = []

        def on_snapshot(self, snap: dict, now: float) -> None:
            self.seen.append(set(snap))

    lines = [records.encode(_start(0.0))]
    lines += [records.encode(step_record(n, 1.0 + n, tokens=100)) for n in range(40)]
    events = _write_log(tmp_path / "events.jsonl", lines)
    says, silent = Reader(frozenset({"steps"})), Reader(None)
    replay(events, observers=[History(), says], max_snapshots=10, resume=False)
    assert says.seen and all(keys <= History.reads for keys in says.seen)
    assert all("steps" in keys and "convention_formulas" not in keys for keys in says.seen)
    replay(events, observers=[History(), silent], max_snapshots=10, resume=False)
    assert silent.seen and all("convention_formulas" in keys for keys in silent.seen)


def test_an_observed_replay_samples_at_the_records_its_pace_names(tmp_path: Path) -> None:
    """Samples are taken at the first step or GPU record at least `interval` of run time after
    the previous one, whatever the block: a log of many 16 kB blocks, steps out of order now and
    then, metrics, GPU samples and a fact among them (dict records in a typed block), blocks
    that hold several samples' times and blocks that reach none: the samples' times are those
    the rule gives, walked record by record here."""
    from trainmeter.runlog import replay as replay_module

    lines = [records.encode(_start(0.0))]
    t = 0.5
    for n in range(1, 3001):
        t += 0.05 if n % 997 else 2.0  # a stall now and then: a sample due at once
        step_t = t - 0.3 if n % 31 == 0 else t  # out of order: older than the last step
        lines.append(records.encode(step_record(n, step_t, tokens=100)))
        lines.append(records.encode(records.make(
            "metric", {"key": "loss", "value": 1.0 / n, "via": "emit", "step": n}, t=t,
            src="emit", rank=0)))
        if n % 20 == 0:
            lines.append(records.encode(records.make(
                "sample.gpu", {"gpus": [{"index": 0, "gpu_util": 0.5}]}, t=t, src="tm")))
        if n % 500 == 0:
            lines.append(records.encode(records.make(
                "fact", {"key": "seq_len", "value": 128, "source": "detected"}, t=t, src="agent",
                rank=0)))
    events = _write_log(tmp_path / "events.jsonl", lines)

    class Times:
        def __init__(self) -> None:
            self.at: list[float] = []

        def on_snapshot(self, snap: dict, now: float) -> None:
            self.at.append(now)

    for most in (300, 40):  # a sample every ~0.5 s (blocks of ~3 s) and every ~4 s
        got = Times()
        replay(events, observers=[got], max_snapshots=most, resume=False)
        interval = replay_module._interval(events, most)
        expected: list[float] = []
        next_t = None
        for line in lines:
            record = json.loads(line)
            if record["kind"] not in ("step", "sample.gpu"):
                continue
            if next_t is None:
                next_t = record["t"] + interval
            elif record["t"] >= next_t:
                expected.append(record["t"])
                next_t = record["t"] + interval
        assert len(expected) > most / 3 and got.at == expected, most
