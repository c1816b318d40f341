"""The one run resolver (directory, name, unique prefix, latest) and the list of runs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from trainmeter.runlog import replay
from trainmeter.runlog.runs import RunNotFound, list_runs, resolve_run, run_name


def make_runs(tmp_path: Path, *names: str) -> Path:
    root = tmp_path / ".trainmeter" / "runs"
    for name in names:
        (root / name).mkdir(parents=True)
        (root / name / "events.jsonl").write_text("")
    return root


def test_latest_name_prefix_and_directory(tmp_path: Path) -> None:
    root = make_runs(
        tmp_path, "20261201-100000-gpt", "20261202-090000-bert", "20261202-100000-gpt",
        "20261202-100000-gpt-2",
    )
    assert resolve_run(None, tmp_path).name == "20261202-100000-gpt-2"
    assert resolve_run("latest", tmp_path).name == "20261202-100000-gpt-2"
    assert resolve_run("gpt", tmp_path).name == "20261202-100000-gpt"  # newest of that name
    assert resolve_run("be", tmp_path).name == "20261202-090000-bert"  # unique name prefix
    assert resolve_run("20261201", tmp_path).name == "20261201-100000-gpt"  # unique time prefix
    assert resolve_run("20261202-100000-gpt", tmp_path).name == "20261202-100000-gpt"  # exact
    assert resolve_run(str(root / "20261201-100000-gpt"), tmp_path) == root / "20261201-100000-gpt"
    events = root / "20261202-090000-bert" / "events.jsonl"
    assert resolve_run(str(events), tmp_path) == events.parent  # a file inside a run
    assert run_name(root / "20261202-100000-gpt-2") == "gpt-2"


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("t5", "no run matches 't5'"),
        ("20261202", "'20261202' fits 3 runs"),  # two days' runs: ambiguous, never a guess
        ("g", "'g' fits 3 runs"),  # gpt and gpt-2 are two names
        ("", "the run name is empty"),
    ],
)
def test_unknown_or_ambiguous_is_one_clear_line(tmp_path: Path, spec: str, words: str) -> None:
    make_runs(tmp_path, "20261201-100000-gpt", "20261202-090000-bert", "20261202-100000-gpt",
              "20261202-100000-gpt-2")
    with pytest.raises(RunNotFound) as err:
        resolve_run(spec, tmp_path)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_no_runs_and_a_directory_that_is_no_run(tmp_path: Path) -> None:
    with pytest.raises(RunNotFound, match="no runs under"):
        resolve_run(None, tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(RunNotFound, match="is not a run directory"):
        resolve_run(str(tmp_path / "empty"), tmp_path)


def test_the_resolver_has_one_home() -> None:
    """`runs` is the resolver's only module: the replay no longer re-exports it (that made the
    two modules import each other)."""
    assert not hasattr(replay, "resolve_run") and not hasattr(replay, "RunNotFound")


def test_list_reads_meta_and_summary_and_tells_the_status(tmp_path: Path) -> None:
    root = make_runs(tmp_path, "20261201-100000-a", "20261201-110000-b", "20261201-120000-c")
    a, b, c = sorted(root.iterdir())
    (a / "meta.json").write_text(json.dumps(
        {"name": "a", "start_utc": "2026-12-01T10:00:00+00:00", "exit_status": 0, "elapsed_s": 61.0}
    ))
    (a / "summary.json").write_text(json.dumps({
        "steps": 100, "tokens_seen": 204800.0, "tokens_per_s": 3357.4,
        "mfu": {"value": 0.41, "convention": "megatron"},
    }))
    (b / "meta.json").write_text(json.dumps({"name": "b", "exit_status": 3}))
    (b / "summary.json").write_text(json.dumps({"steps": 5}))
    # c: killed before tm wrote anything but its first record; tm's pid is gone
    (c / "events.jsonl").write_text(json.dumps(
        {"v": 1, "t": 1.0, "src": "tm", "rank": None, "pid": 2**22 + 12345, "kind": "run.start",
         "d": {"name": "c"}}) + "\n")
    infos = {i.name: i for i in list_runs(tmp_path)}
    assert infos["a"].status == "ok" and infos["a"].duration_s == 61.0
    assert (infos["a"].steps, infos["a"].tokens, infos["a"].mfu) == (100, 204800.0, 0.41)
    assert infos["a"].mfu_convention == "megatron"
    assert infos["b"].status == "exit 3" and infos["b"].mfu is None  # absent, not zero
    assert infos["c"].status == "no end" and infos["c"].start_utc == "2026-12-01T12:00:00+00:00"
    # the same run, still going: its tm is alive
    (c / "events.jsonl").write_text(json.dumps(
        {"v": 1, "t": 1.0, "src": "tm", "rank": None, "pid": os.getpid(), "kind": "run.start",
         "d": {"name": "c"}}) + "\n")
    assert {i.name: i for i in list_runs(tmp_path)}["c"].status == "running"
