"""`tm` as a person types it: usage errors before anything starts, the run log, nesting."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from trainmeter import __version__

from ..conftest import read_events, run_dirs, run_tm, tm_env
from ..supervisor.procs import SENDER, facts, kinds, write_script


def test_no_arguments_prints_usage_and_exits_2(tmp_path: Path) -> None:
    result = run_tm([], tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("usage: tm ")
    assert not (tmp_path / ".trainmeter").exists()


def test_version_and_help(tmp_path: Path) -> None:
    version = run_tm(["--version"], tmp_path)
    assert (version.returncode, version.stdout) == (0, f"tm {__version__}\n")
    helped = run_tm(["--help"], tmp_path)
    assert helped.returncode == 0 and "--budget-tokens" in helped.stdout


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ["--budget-tokens", "12X", "t.py"],
            "tm: --budget-tokens: '12X' is not a number (use 20B, 1.5e9, 300M)",
        ),
        (["--plan-mfu", "40", "t.py"], "tm: --plan-mfu: '40' must be between 0 and 1 (use 0.4 or 40%)"),
        (["--frobnicate", "t.py"], "tm: unknown option '--frobnicate' (options go before the script; see tm --help)"),
    ],
)
def test_a_bad_flag_is_one_line_exit_2_and_nothing_starts(
    tmp_path: Path, argv: list[str], line: str
) -> None:
    marker = tmp_path / "ran"
    write_script(tmp_path / "t.py", f"open({str(marker)!r}, 'w').close()")
    result = run_tm(argv, tmp_path)
    assert result.returncode == 2
    assert result.stderr == line + "\n"
    assert not marker.exists()  # the script never ran
    assert not (tmp_path / ".trainmeter").exists()  # and no run directory was made


def test_run_log_order_declared_facts_and_summary_line(tmp_path: Path) -> None:
    write_script(tmp_path / "train.py", SENDER)
    result = run_tm(
        ["--no-agent", "--budget-tokens", "40k", "--convention", "hf",
         "train.py", "--api-key", "s3cret", "--max-tokens", "512"],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    [run] = run_dirs(tmp_path)
    assert run.name.endswith("-train") and run.name[:8].isdigit()
    events = read_events(run)
    assert kinds(events)[0] == "run.start" and kinds(events)[-1] == "run.end"
    start = events[0]
    assert start["src"] == "tm" and start["rank"] is None and isinstance(start["pid"], int)
    assert start["d"]["argv"][-4:] == ["--api-key", "<redacted>", "--max-tokens", "512"]
    assert "s3cret" not in (run / "events.jsonl").read_text()
    assert start["d"]["declared"] == {"budget_tokens": 40_000, "convention": "hf"}
    assert start["d"]["node_uptime_s"] > 0 and start["d"]["tm_version"] == __version__
    assert facts(events, "budget_tokens") == [
        {"key": "budget_tokens", "value": 40_000, "source": "declared"}
    ]
    # the child's 40 records arrived, in the order it sent them
    steps = [e["d"]["n"] for e in events if e["kind"] == "step"]
    assert steps == list(range(1, 21))
    assert sum(1 for e in events if e["kind"] == "metric") == 20
    # two malformed lines: counted, and the count is a fact in the log
    assert facts(events, "ingest_dropped")[-1]["value"] == 2
    meta = json.loads((run / "meta.json").read_text())
    assert meta["name"] == "train" and meta["exit_status"] == 0
    assert meta["argv"][-3] == "<redacted>"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["steps"] == 20
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("trainmeter: ") and "20 steps" in last and str(run) in last


def test_quiet_prints_no_summary_line(tmp_path: Path) -> None:
    write_script(tmp_path / "t.py", "pass")
    result = run_tm(["-q", "--no-agent", "t.py"], tmp_path)
    assert result.returncode == 0
    assert "run " not in result.stderr and "steps" not in result.stderr


def test_nested_tm_runs_the_command_untouched(tmp_path: Path) -> None:
    write_script(
        tmp_path / "inner.py",
        "import os, sys; print(os.environ['TRAINMETER_SOCKET'] == sys.argv[1]); sys.exit(4)",
    )
    outer_socket = str(tmp_path / "outer.sock")
    env = tm_env(TRAINMETER_SOCKET=outer_socket)
    result = run_tm(["--budget-tokens", "1k", "inner.py", outer_socket], tmp_path, env=env)
    assert result.returncode == 4
    assert result.stdout == "True\n"  # same socket: the outer tm keeps watching
    assert result.stderr == ""
    assert not (tmp_path / ".trainmeter").exists()  # no second run directory


def test_tm_inside_tm_gives_one_run_directory(tmp_path: Path) -> None:
    write_script(tmp_path / "inner.py", "import sys; sys.exit(6)")
    write_script(
        tmp_path / "outer.py",
        "import subprocess, sys\n"
        "sys.exit(subprocess.call([sys.executable, '-m', 'trainmeter', 'inner.py']))\n",
    )
    result = run_tm(["-q", "--no-agent", "outer.py"], tmp_path)
    assert result.returncode == 6
    assert len(run_dirs(tmp_path)) == 1


def test_a_read_only_directory_still_runs_the_child_and_returns_its_status(
    tmp_path: Path,
) -> None:
    if os.geteuid() == 0:
        # root ignores permission bits: make .trainmeter a file, so the directory cannot exist
        (tmp_path / ".trainmeter").write_text("in the way")
    else:
        tmp_path.chmod(stat.S_IRUSR | stat.S_IXUSR)
    marker = Path(os.environ.get("TMPDIR", "/tmp")) / f"tm-ro-{os.getpid()}"
    script = tmp_path / "t.py"
    try:
        if os.geteuid() != 0:
            tmp_path.chmod(0o755)
        write_script(script, f"open({str(marker)!r}, 'w').close(); raise SystemExit(9)")
        if os.geteuid() != 0:
            tmp_path.chmod(stat.S_IRUSR | stat.S_IXUSR)
        result = run_tm(["t.py"], tmp_path)
    finally:
        tmp_path.chmod(0o755)
    assert result.returncode == 9
    assert marker.exists()
    marker.unlink()
    warnings = [line for line in result.stderr.splitlines() if "cannot write the run log" in line]
    assert len(warnings) == 1  # warned once, not once a second
    assert result.stderr.strip().splitlines()[-1].endswith("no run log")


def test_no_agent_leaves_pythonpath_alone_and_no_tap_is_passed_on(tmp_path: Path) -> None:
    write_script(
        tmp_path / "env.py",
        "import os; print(os.environ.get('PYTHONPATH', '-'), os.environ.get('TRAINMETER_NO_TAP'))",
    )
    plain = run_tm(["-q", "--no-agent", "--no-tap", "env.py"], tmp_path, env=tm_env(PYTHONPATH="/x"))
    assert plain.stdout.split() == ["/x", "1"]
    agent = run_tm(["-q", "env.py"], tmp_path, env=tm_env(PYTHONPATH="/x"))
    first, _, rest = agent.stdout.split()[0].partition(os.pathsep)
    assert first.endswith("bootstrap") and rest == "/x"
    assert agent.stdout.split()[1] == "None"


def test_socket_directory_is_private_and_removed_at_the_end(tmp_path: Path) -> None:
    write_script(
        tmp_path / "s.py",
        "import os, stat\n"
        "d = os.path.dirname(os.environ['TRAINMETER_SOCKET'])\n"
        "print(d, oct(stat.S_IMODE(os.stat(d).st_mode)))\n",
    )
    result = run_tm(["-q", "--no-agent", "s.py"], tmp_path)
    directory, mode = result.stdout.split()
    assert mode == "0o700"
    assert not os.path.exists(directory)


def test_runs_started_together_get_their_own_directories(tmp_path: Path) -> None:
    write_script(tmp_path / "t.py", "pass")
    cmd = [sys.executable, "-m", "trainmeter", "-q", "--no-agent", "--name", "same", "t.py"]
    procs = [subprocess.Popen(cmd, cwd=tmp_path, env=tm_env()) for _ in range(3)]
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0]
    same = [p.name for p in run_dirs(tmp_path)]
    assert len(same) == 3 and all("-same" in name for name in same)


def test_the_agent_is_loaded_into_the_child_and_says_hello(tmp_path: Path) -> None:
    write_script(tmp_path / "t.py", "import os; print(os.getpid())")
    result = run_tm(["-q", "t.py"], tmp_path)
    assert result.returncode == 0, result.stderr
    child_pid = int(result.stdout)
    events = read_events(run_dirs(tmp_path)[0])
    hellos = [e for e in events if e["kind"] == "hello"]
    assert hellos and all(e["pid"] == child_pid and e["src"] == "agent" for e in hellos)
    # a Python that loads the agent is not reported as silent
    assert not facts(events, "observe_only")


@pytest.mark.slow
def test_a_non_python_command_is_reported_observe_only(tmp_path: Path) -> None:
    """The silent-python watcher is wired in: a shell command that runs for a while is named
    as watched from outside, by the live watcher (its note names the process), not only at the
    end. The watcher gives a non-Python root 3 s of grace and the live loop looks once a second:
    the shell runs until the fact is in the log (60 s at most), not a fixed 4.5 s, which a loaded
    box's tm, still importing its live loop, can outlast. (The end judges a command the watcher
    missed with the same words, so only the note tells the two apart.)"""
    # the fact's key, spelled so that the command line does not hold it (`run.start` logs the
    # command line: a plain "observe_only" here is in the log at once)
    wait = ('k=observe; i=0; while [ $i -lt 600 ] && ! grep -qs "${k}_only" '
            ".trainmeter/runs/*/events.jsonl; do sleep 0.1; i=$((i+1)); done")
    result = run_tm(["-q", "--", "sh", "-c", wait], tmp_path)
    assert result.returncode == 0
    [fact] = facts(read_events(run_dirs(tmp_path)[0]), "observe_only")
    assert fact["source"] == "detected" and "not a Python program (sh)" in fact["value"]
    assert fact["note"].startswith("pid "), fact["note"]  # not "judged when the run ended"


def test_declared_infinity_is_one_line_and_exit_2(tmp_path: Path) -> None:
    for flag, value in [("--budget-tokens", "1e999999999"), ("--budget-flops", "1e400"),
                        ("--params", "1e400"), ("--plan-hours", "1e-400")]:
        result = run_tm([flag, value, "t.py"], tmp_path)
        assert result.returncode == 2, result.stderr
        assert len(result.stderr.splitlines()) == 1 and "out of range" in result.stderr
    assert not (tmp_path / ".trainmeter").exists()


def test_natural_command_lines(tmp_path: Path) -> None:
    """`tm python train.py`, `tm /venv/bin/python train.py`: the program, exactly as after --."""
    write_script(tmp_path / "train.py", "import sys; print('ran', sys.argv[1:])")
    for argv in (["-q", "python3", "train.py", "x"], ["-q", sys.executable, "train.py", "x"]):
        result = run_tm(argv, tmp_path)
        assert result.returncode == 0, result.stderr
        assert result.stdout == "ran ['x']\n"
    nothing = run_tm(["nosuchthing-xyz"], tmp_path)
    assert nothing.returncode == 2 and len(nothing.stderr.splitlines()) == 1
    assert len(run_dirs(tmp_path)) == 2  # the refused word left none


def test_tm_inside_tm_with_a_missing_script_is_127(tmp_path: Path) -> None:
    result = run_tm(["-q", "--", sys.executable, "-m", "trainmeter", "nosuch.py"], tmp_path)
    assert result.returncode == 127
    assert "tm: nosuch.py: no such file" in result.stderr.splitlines()


def test_a_reserved_command_word_is_never_run_as_a_program(tmp_path: Path) -> None:
    """`tm runs` is tm's command even when a program called `runs` is on PATH."""
    from trainmeter.cli.main import COMMANDS, _load

    assert all(_load(name).main for name in COMMANDS)  # every command word has its module
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    marker = tmp_path / "the-program-ran"
    program = bin_dir / "runs"
    program.write_text(f"#!/bin/sh\ntouch {marker}\n")
    program.chmod(0o755)
    env = tm_env(PATH=f"{bin_dir}:{os.environ.get('PATH', '')}")
    result = run_tm(["runs"], tmp_path, env=env)
    assert not marker.exists(), "tm ran the program instead of its own command"
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / ".trainmeter" / "runs").exists() or not any(
        (tmp_path / ".trainmeter" / "runs").iterdir()
    )  # listing runs starts none


@pytest.mark.parametrize("kind", ["file", "dangling symlink"])
def test_something_in_the_way_of_the_runs_directory_is_named(tmp_path: Path, kind: str) -> None:
    (tmp_path / ".trainmeter").mkdir()
    runs = tmp_path / ".trainmeter" / "runs"
    if kind == "file":
        runs.write_text("in the way")
        expected = f"{runs} is a file, not a directory"
    else:
        runs.symlink_to(tmp_path / "gone")
        expected = f"{runs} is a symlink to {tmp_path / 'gone'}, which does not exist"
    write_script(tmp_path / "t.py", "raise SystemExit(5)")
    result = run_tm(["-q", "t.py"], tmp_path)
    assert result.returncode == 5  # the training still ran
    [line] = [x for x in result.stderr.splitlines() if "cannot write the run log" in x]
    assert expected in line and "File exists" not in line
