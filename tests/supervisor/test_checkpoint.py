"""The replay's checkpoint beside the log: resumed equals a full replay, and doubt means ignore.

Each log below goes through a full replay (no checkpoint) and through a replay that resumes
from the checkpoint another replay left; the snapshots and the dashboard's history must be the
same. A checkpoint that is corrupt, signed by another key, taken from another log, or older than
a rewritten log is ignored (and never unpickled) and the answer is the full replay's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainmeter import records
from trainmeter.runlog import checkpoint
from trainmeter.runlog import replay as replay_module
from trainmeter.runlog.replay import replay
from trainmeter.views.history import History

from ..engine import build as b


@pytest.fixture(autouse=True)
def _private_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    state = tmp_path / "state"
    monkeypatch.setenv("TRAINMETER_STATE_DIR", str(state))
    return state


def _single_gpu() -> list[dict]:
    out = [b.start(0.0), b.hello(0.5, probes=("steps", "tokens")), b.device(0.6)]
    out += [b.fact(0.7, "n_params", 124_000_000), b.fact(0.7, "seq_len", 1024)]
    energy = 0.0
    for i in range(1, 400):
        t = 1.0 + 0.25 * i
        out.append(b.phase(t - 0.01, "data", 0.01))
        out.append(b.step(t, tokens=8192, n=i))
        out.append(b.rec("metric", t, key="train_loss", value=3.0 / (1 + i / 50), via="emit", step=i))
        if i % 4 == 0:
            energy += 700.0
            out.append(b.gpu(t, b.gpu_row(gpu_util=0.9, sm_active=0.8, power_w=700.0, energy_j=energy)))
    out.append(b.end(101.0))
    return out


def _two_ranks() -> list[dict]:
    out = [b.start(0.0)]
    for r in (0, 1):
        out.append(b.hello(0.5, world_size=2, rank=r))
        out.append(b.device(0.6, index=r, rank=r))
    for i in range(1, 200):
        for r in (0, 1):
            out.append(b.step(1.0 + 0.5 * i + 0.01 * r, tokens=4096, rank=r, n=i))
    out.append(b.end(120.0, exit_status=1))
    return out


def _lines(recs: list[dict]) -> list[str]:
    return [records.encode(r) for r in recs]


def _logs() -> dict[str, str]:
    """Name -> the log's text: clean runs, a crash's cut last line, bad lines in between."""
    single, ranks = _lines(_single_gpu()), _lines(_two_ranks())
    messy = single[:300] + ["garbage", '{"v": 1, "t": 1, "kind": "teleport", "d": {}}', ""]
    messy += single[300:]
    cut = "\n".join(ranks[:-1]) + "\n" + ranks[-1][:25]
    return {
        "single_gpu": "\n".join(single) + "\n",
        "two_ranks": "\n".join(ranks) + "\n",
        "bad_lines": "\n".join(messy) + "\n",
        "crash_cut": cut,
    }


def _compare(full, resumed) -> None:
    assert resumed.snapshot == full.snapshot
    assert (resumed.records, resumed.bad, resumed.lines, resumed.finished) == (
        full.records, full.bad, full.lines, full.finished,
    )
    assert resumed.bad_reasons == full.bad_reasons


def _history_view(events: Path) -> tuple:
    history = History()
    result = replay(events, observers=[history])
    history.on_snapshot(result.snapshot, None)
    return result, json.dumps(history.dump(), sort_keys=True)


@pytest.mark.parametrize("name", sorted(_logs()))
def test_resumed_replay_equals_the_full_one(tmp_path: Path, name: str) -> None:
    events = tmp_path / "events.jsonl"
    events.write_text(_logs()[name])
    full = replay(events, resume=False)
    assert not checkpoint.path_for(events).exists()  # resume=False neither reads nor writes
    first = replay(events)
    assert checkpoint.load(events) is not None  # left for the next look
    _compare(full, first)
    again = replay(events)
    _compare(full, again)


@pytest.mark.parametrize("name", sorted(_logs()))
def test_resumed_history_equals_the_full_one(tmp_path: Path, name: str) -> None:
    events = tmp_path / "events.jsonl"
    events.write_text(_logs()[name])
    full, full_history = _history_view(events)
    checkpoint.path_for(events).unlink()
    cold, cold_history = _history_view(events)
    warm, warm_history = _history_view(events)
    assert warm_history == cold_history == full_history
    _compare(full, warm)
    # a summary after the view resumes from the view's checkpoint: the same snapshot
    _compare(replay(events, resume=False), replay(events))


def test_a_growing_log_replays_only_what_follows(tmp_path: Path, monkeypatch) -> None:
    lines = _lines(_single_gpu())
    events = tmp_path / "events.jsonl"
    events.write_text("\n".join(lines[:500]) + "\n")
    replay(events)
    offset = checkpoint.load(events)[0]
    assert offset == events.stat().st_size
    with open(events, "a") as fh:
        fh.write("\n".join(lines[500:]) + "\n")
    fed: list[int] = []
    real = replay_module.typed_many

    def counting(decoder, raw):
        fed.append(len(raw))
        return real(decoder, raw)

    monkeypatch.setattr(replay_module, "typed_many", counting)
    resumed = replay(events)
    assert sum(fed) == len(lines) - 500  # only the appended lines were read
    monkeypatch.undo()
    _compare(replay(events, resume=False), resumed)


def _prepared(tmp_path: Path) -> tuple[Path, dict]:
    events = tmp_path / "run" / "events.jsonl"
    events.parent.mkdir()
    events.write_text(_logs()["single_gpu"])
    full = replay(events, resume=False)
    replay(events)
    return events, full.snapshot


def test_a_corrupt_checkpoint_is_ignored_and_rebuilt(tmp_path: Path) -> None:
    events, truth = _prepared(tmp_path)
    ckpt = checkpoint.path_for(events)
    data = bytearray(ckpt.read_bytes())
    data[-10] ^= 0xFF  # one byte of the state changed
    ckpt.write_bytes(bytes(data))
    assert checkpoint.load(events) is None
    assert replay(events).snapshot == truth
    assert checkpoint.load(events) is not None  # rebuilt
    ckpt.write_bytes(ckpt.read_bytes()[:100])  # cut short
    assert checkpoint.load(events) is None
    assert replay(events).snapshot == truth


def test_a_checkpoint_signed_by_another_key_is_never_unpickled(tmp_path: Path, monkeypatch) -> None:
    events, truth = _prepared(tmp_path)
    marker = tmp_path / "unpickled"

    class Bomb:
        def __reduce__(self):
            return (Path.touch, (marker,))

    # a well-formed checkpoint of a hostile state, signed with someone else's key
    monkeypatch.setenv("TRAINMETER_STATE_DIR", str(tmp_path / "someone-else"))
    size = events.stat().st_size
    assert checkpoint.save(events, size, [], Bomb(), checkpoint.prefix_hash(events, size).hexdigest())
    monkeypatch.setenv("TRAINMETER_STATE_DIR", str(tmp_path / "state"))
    assert checkpoint.load(events) is None
    assert replay(events).snapshot == truth
    assert not marker.exists()


def test_a_key_others_can_read_is_not_used(tmp_path: Path) -> None:
    events, _ = _prepared(tmp_path)
    key = checkpoint.state_dir() / "checkpoint.key"
    key.chmod(0o644)
    assert checkpoint.key() is None
    assert checkpoint.load(events) is None


def test_a_checkpoint_from_another_log_is_ignored(tmp_path: Path) -> None:
    events, _ = _prepared(tmp_path)
    other = tmp_path / "other" / "events.jsonl"
    other.parent.mkdir()
    other.write_text(_logs()["two_ranks"])
    checkpoint.path_for(other).write_bytes(checkpoint.path_for(events).read_bytes())
    assert checkpoint.load(other) is None
    assert replay(other).snapshot == replay(other, resume=False).snapshot


def test_a_rewritten_log_makes_the_checkpoint_stale(tmp_path: Path) -> None:
    events, _ = _prepared(tmp_path)
    text = events.read_text()
    middle = text.index('"tokens":8192', len(text) // 2)
    changed = text[:middle] + '"tokens":8193' + text[middle + 13 :]  # same length, new bytes
    events.write_text(changed)
    assert len(changed) == len(text)
    assert checkpoint.load(events) is None
    assert replay(events).snapshot == replay(events, resume=False).snapshot
    assert checkpoint.load(events) is not None  # rebuilt for the log as it is now
    events.write_text(text[: len(text) // 2])  # shorter than the checkpoint covers
    assert checkpoint.load(events) is None
    assert replay(events).snapshot == replay(events, resume=False).snapshot


def test_a_same_length_edit_and_one_appended_byte_do_not_pass(tmp_path: Path) -> None:
    """Issue 29 item 9: an edit in the middle of the log that keeps its length, then one byte
    appended (so the size moved and the inode and times were not compared), left the checkpoint
    believed: the head and tail hashes still matched. Every covered byte is hashed now."""
    events, _ = _prepared(tmp_path)
    text = events.read_text()
    first = text.index('"kind":"step"', len(text) // 3)
    at = text.index('"k":1,', first)
    changed = text[:at] + '"k":9,' + text[at + 6 :]  # same length: this record is 9 steps now
    events.write_text(changed + "\n")  # and one byte more
    truth = replay(events, resume=False).snapshot
    assert truth["steps"] == 399 + 8
    assert checkpoint.load(events) is None
    assert replay(events).snapshot == truth


def test_an_unwritten_log_is_not_hashed_and_a_touched_one_is(tmp_path: Path, monkeypatch) -> None:
    """Opening a finished run reads the checkpoint alone while the log was not written since the
    save (inode, size, mtime, ctime); after anything touched it, every covered byte is hashed,
    and an unchanged content passes."""
    import os

    events, truth = _prepared(tmp_path)
    hashed: list[int] = []
    real = checkpoint.prefix_hash

    def counting(path, offset):
        hashed.append(offset)
        return real(path, offset)

    monkeypatch.setattr(checkpoint, "prefix_hash", counting)
    assert checkpoint.load(events)[3] is None and hashed == []
    st = events.stat()
    os.utime(events, ns=(st.st_atime_ns, st.st_mtime_ns))  # the same times again: ctime moves
    found = checkpoint.load(events)
    assert found is not None and hashed == [found[0]]
    assert replay(events).snapshot == truth


def test_another_version_of_the_code_does_not_resume(tmp_path: Path, monkeypatch) -> None:
    events, _ = _prepared(tmp_path)
    monkeypatch.setattr(checkpoint, "_fingerprint", "another build")
    assert checkpoint.load(events) is None


def test_a_finished_run_leaves_a_checkpoint_that_equals_a_full_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`tm` saves its live engine beside the sealed log: the next look resumes from it and
    shows what a full replay shows (and what summary.json says)."""
    from trainmeter.cli.args import parse_run_args
    from trainmeter.supervisor import ending
    from trainmeter.supervisor.session import supervise

    from ..conftest import run_dirs
    from .fakes import FakeSampler
    from .procs import SENDER, write_script

    monkeypatch.setattr(ending, "LIVE_CHECKPOINT_FROM", 0)  # however short the log
    monkeypatch.chdir(tmp_path)
    write_script(tmp_path / "train.py", SENDER)
    status = supervise(
        parse_run_args(["-q", "--no-agent", "train.py"]),
        samplers_factory=lambda pid, run_dir: [FakeSampler("sample.host", {"pids": [pid]})],
        watcher=object(),
        interval=0.02,
    )
    assert status == 0
    [run] = run_dirs(tmp_path)
    events = run / "events.jsonl"
    found = checkpoint.load(events)
    assert found is not None and found[0] == events.stat().st_size
    resumed, full = replay(events), replay(events, resume=False)
    _compare(full, resumed)
    live = json.loads((run / "summary.json").read_text())
    assert json.loads(json.dumps(resumed.snapshot)) == live
    assert resumed.snapshot["steps"] == 20
