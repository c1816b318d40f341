"""What a replay's start imports, pinned by module name (a count that cannot drift with the
machine's load, where a timing would): `tm summary`, `tm view`, the exports and the benchmark's
replay row each pay the replay path's imports in a fresh process, before the first record.

- the replay row: `from trainmeter.runlog.replay import replay` and
  `from trainmeter.views.history import History`, then a replay of a log with a GPU, facts, a
  hello, steps, metrics, phases and an end, the dashboard's history observing it;
- `tm summary --json`: the CLI's start, the run's resolution, the replay and its checkpoint;
- `tm export csv` and `tm view` (its server started, then stopped) of the same run.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from trainmeter import records
from trainmeter.runlog.decode import FAST_FROM

from ..conftest import tm_env

#: Not on the replay's path: each was once there, with what it cost on the box it was measured on.
NOT_IN_A_REPLAY = {
    "dataclasses": "ReplayResult and hardware's DeviceSpec are plain classes (~8 ms with inspect)",
    "inspect": "dataclasses' and orjson's (dis, tokenize, ast, ~6 ms)",
    "orjson": "its import pulls in dataclasses: loaded once FAST_FROM lines are not read typed",
    "threading": "the recorder's and WarnOnce's locks are _thread's (~0.5 ms)",
    "signal": "engine.death names a signal only when one ended the run (~0.5 ms of enums)",
}
#: Not in `tm summary --json` either (its terminal form draws with rich, which imports them).
NOT_IN_A_SUMMARY = {
    **NOT_IN_A_REPLAY,
    "dataclasses": "runlog.runs' RunInfo is a plain class: every command resolves its run there",
}
#: Nor in an export to CSV.
NOT_IN_AN_EXPORT = {
    **NOT_IN_A_SUMMARY,
    "dataclasses": "exporters.tables' RunTable is a plain class",
}
#: Nor in `tm view` (whose server has threads of its own).
NOT_IN_A_VIEW = {
    **{name: why for name, why in NOT_IN_A_SUMMARY.items() if name != "threading"},
    "dataclasses": "exporters.httpd's Request and Response, prometheus' Family: plain classes",
    "email": "httpd's Date header is its own `http_date` (~24M instructions of email.utils)",
}

REPLAY = """
import sys
from pathlib import Path
from trainmeter.runlog.replay import replay
from trainmeter.views.history import History
history = History()
r = replay(Path(sys.argv[1]), observers=[history], resume=False)
assert r.records == int(sys.argv[2]) and r.bad == 0, (r.records, r.bad_reasons)
assert r.snapshot["peak"]["key"] == "h100_sxm" and history.series, r.snapshot
print(" ".join(sorted(sys.modules)))
"""

SUMMARY = """
import sys
from trainmeter.cli.main import main
sys.argv = ["tm", *sys.argv[1:]]
assert main() == 0
print(" ".join(sorted(sys.modules)), file=sys.stderr)
"""

VIEW = """
import sys, threading
from trainmeter.cli.view import main
stop = threading.Event()
stop.set()  # serve, then stop at once
assert main(["--port", "0"], stop) == 0
print(" ".join(sorted(sys.modules)), file=sys.stderr)
"""


def _log(path: Path, comm: int = 0) -> int:
    """A short run's log: every kind a replay reads typed, and its few other lines; `comm`
    records more (a kind not read typed). Returns its records."""
    gpu = {"gpus": [{"index": 0, "uuid": "GPU-0", "name": "NVIDIA H100 80GB HBM3",
                     "gpu_util": 0.9, "power_w": 500.0}]}
    lines = [
        records.make("run.start", {"argv": ["x"]}, t=1.0, src="tm"),
        records.make("hello", {"world_size": 1, "probes": ["steps"]}, t=1.5, src="agent",
                     rank=0, pid=5),
        records.make("fact", {"key": "n_params", "value": 1000, "source": "detected"}, t=1.6,
                     src="agent", rank=0, pid=5),
    ]
    for i in range(1, 41):
        t = 2.0 + i
        lines += [
            records.make("phase", {"name": "data", "s": 0.01, "n": 1}, t=t - 0.01, src="agent",
                         rank=0, pid=5),
            records.make("step", {"k": 1, "tokens": 8, "n": i}, t=t, src="agent", rank=0, pid=5),
            records.make("metric", {"key": "loss", "value": 1.0 / i, "step": i}, t=t,
                         src="agent", rank=0, pid=5),
            records.make("sample.gpu", gpu, t=t, src="tm"),
        ]
        if i <= comm:
            lines.append(records.make("comm", {"k": 1, "n": i, "s": 0.001}, t=t, src="agent",
                                      rank=0, pid=5))
    lines.append(records.make("run.end", {"exit_status": 0}, t=50.0, src="tm"))
    path.write_text("".join(records.encode(r) + "\n" for r in lines))
    return len(lines)


def _replay(events: Path, n: int, cwd: Path) -> set[str]:
    proc = subprocess.run([sys.executable, "-c", REPLAY, str(events), str(n)], env=tm_env(),
                          cwd=cwd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return set(proc.stdout.split())


@pytest.mark.slow
def test_a_replay_with_the_history_loads_none_of_the_modules_it_no_longer_needs(
    tmp_path: Path,
) -> None:
    events = tmp_path / "events.jsonl"
    loaded = _replay(events, _log(events), tmp_path)
    assert {"trainmeter.engine.snapshot", "trainmeter.hardware.specs", "msgspec"} <= loaded
    assert {name for name in NOT_IN_A_REPLAY if name in loaded} == set()


@pytest.mark.slow
def test_a_log_of_many_lines_not_read_typed_still_parses_them_with_orjson(tmp_path: Path) -> None:
    """orjson is deferred, not dropped: once `FAST_FROM` lines have gone to the decoder (here
    `comm` records), they are parsed by it, as before."""
    events = tmp_path / "events.jsonl"
    loaded = _replay(events, _log(events, comm=FAST_FROM), tmp_path)
    assert "orjson" in loaded


def _command(code: str, argv: list[str], tmp_path: Path) -> tuple[str, set[str]]:
    """(stdout, the modules loaded) of `code` run with `argv` beside a run of `_log`'s."""
    run = tmp_path / ".trainmeter" / "runs" / "20261206-180000-x"
    run.mkdir(parents=True)
    _log(run / "events.jsonl")
    env = tm_env(TRAINMETER_STATE_DIR=str(tmp_path / "state"))
    proc = subprocess.run([sys.executable, "-c", code, *argv], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, set(proc.stderr.split())


@pytest.mark.slow
def test_tm_summary_json_loads_none_of_them(tmp_path: Path) -> None:
    out, loaded = _command(SUMMARY, ["summary", "--json"], tmp_path)
    assert '"tokens_seen": 320' in out  # it did replay the run
    assert "trainmeter.runlog.checkpoint" in loaded  # and left its checkpoint (the first look)
    assert {name for name in NOT_IN_A_SUMMARY if name in loaded} == set()


@pytest.mark.slow
def test_tm_export_csv_loads_none_of_them(tmp_path: Path) -> None:
    _, loaded = _command(SUMMARY, ["export", "csv", "-o", str(tmp_path / "x.csv")], tmp_path)
    assert (tmp_path / "x.csv").read_text().count("\n") == 41  # its header and 40 steps
    assert {name for name in NOT_IN_AN_EXPORT if name in loaded} == set()


@pytest.mark.slow
def test_tm_view_loads_none_of_them(tmp_path: Path) -> None:
    _, loaded = _command(VIEW, [], tmp_path)
    assert {"trainmeter.views.web.server", "trainmeter.exporters.prometheus"} <= loaded
    assert {name for name in NOT_IN_A_VIEW if name in loaded} == set()
