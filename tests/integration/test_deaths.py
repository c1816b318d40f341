"""Each kind of death made to happen for real on CPU, under `tm`: the run says why, in the end
line, `tm runs`, `summary.json`, the passport and `meta.json`; and the process dies exactly as
it would without `tm` (same traceback on stderr, same exit status, same losses: promise 1)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import (
    default_signals,
    latest_summary,
    read_events,
    reserved_port,
    run_dirs,
    run_tm,
    tm_env,
    together,
)
from tests.engine.snapshot_keys import undocumented

from . import hung

pytestmark = pytest.mark.slow

SCRIPTS = Path(__file__).parent / "scripts"
DIES = str(SCRIPTS / "dies.py")
GIB = 2**30


def _env(**extra: str) -> dict[str, str]:
    return tm_env(OMP_NUM_THREADS="1", **extra)


def _plain(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=240)


def _ours(stderr: str) -> tuple[str, list[str]]:
    """The child's stderr (tm's own lines taken out) and tm's lines."""
    lines = stderr.splitlines(keepends=True)
    mine = [ln for ln in lines if ln.startswith("trainmeter:")]
    return "".join(ln for ln in lines if not ln.startswith("trainmeter:")), mine


def _runs_status(cwd: Path) -> str:
    out = run_tm(["runs"], cwd, env=_env()).stdout
    return out.splitlines()[-1]


def _same_death(mode: str, cwd: Path, **env: str) -> tuple[subprocess.CompletedProcess, str, dict]:
    """Run `dies.py mode` plain and under tm, at once (it writes nothing to its directory);
    assert promise 1; return tm's run, end line, summary."""
    plain, ours = together(
        lambda: _plain([DIES, mode], cwd, _env(**env)),
        lambda: run_tm(["--no-web", DIES, mode], cwd, env=_env(**env)),
    )
    child_err, mine = _ours(ours.stderr)
    status = plain.returncode if plain.returncode >= 0 else 128 - plain.returncode  # as a shell
    assert ours.returncode == status
    assert child_err == plain.stderr
    assert ours.stdout == plain.stdout  # the losses, bit for bit
    end = [ln for ln in mine if "; run " in ln]
    assert len(end) == 1, ours.stderr
    snap = latest_summary(cwd)
    assert undocumented(snap) == []  # every key of a death is in docs/snapshot.md
    return ours, end[0].strip(), snap


def test_cuda_out_of_memory_says_so_with_the_sizes_and_the_rank(tmp_path: Path) -> None:
    ours, end, snap = _same_death("oom", tmp_path, RANK="3", WORLD_SIZE="4")
    assert ours.returncode == 1
    assert end.startswith("trainmeter: crashed: CUDA out of memory (rank 3); ")
    death = snap["death"]
    assert death["cause"] == "exception" and death["rank"] == 3
    assert death["exception"]["type"] == "torch.OutOfMemoryError"
    assert death["exception"]["where"].startswith("dies.py:")
    assert death["oom"] == {
        "tried_b": 2 * GIB, "total_b": int(79.14 * GIB), "free_b": int(1.23 * GIB),
        "in_use_b": int(77.90 * GIB), "allocated_b": int(75.20 * GIB),
        "reserved_unallocated_b": int(1.50 * GIB), "gpu": 0,
    }
    assert "crashed: CUDA out of memory (rank 3)" in _runs_status(tmp_path)
    run_dir = run_dirs(tmp_path)[-1]
    assert json.loads((run_dir / "meta.json").read_text())["cause"] == death["text"]
    assert json.loads((run_dir / "passport.json").read_text())["run"]["status"] == death["text"]
    summary = run_tm(["summary", str(run_dir)], tmp_path, env=_env()).stdout
    assert "crashed: CUDA out of memory (rank 3)" in summary
    assert "tried to allocate 2.0 GiB with 1.2 GiB free of 79.1 GiB on GPU 0; 75.2 GiB allocated" in summary


def test_a_memory_alert_comes_before_the_out_of_memory_crash(tmp_path: Path) -> None:
    """The allocator (replayed) fills and retries; tm alerts with the numbers, then the OOM."""
    stats = []
    for reserved, allocated, retries in ((40, 30, 0), (60, 45, 0), (70, 50, 0), (77, 57, 3)):
        stats.append({"total_b": 80 * GIB, "stats": {
            "allocated_bytes.all.current": allocated * GIB, "allocated_bytes.all.peak": 60 * GIB,
            "reserved_bytes.all.current": reserved * GIB, "reserved_bytes.all.peak": reserved * GIB,
            "inactive_split_bytes.all.current": GIB, "num_alloc_retries": retries, "num_ooms": 0,
        }})
    fake = tmp_path / "allocator.json"
    fake.write_text(json.dumps(stats))
    env = _env(TRAINMETER_FAKE_CUDA_MEMORY=str(fake), DIES_STEP_PAUSE="0.5")
    ours = run_tm(["--no-web", DIES, "oom", "12"], tmp_path, env=env)
    assert ours.returncode == 1
    events = read_events(run_dirs(tmp_path)[-1])
    crash_t = next(e["t"] for e in events if e["kind"] == "crash")
    alerts = [e for e in events if e["kind"] == "alert" and e["d"]["kind"].startswith("memory_")]
    assert alerts and all(a["t"] < crash_t for a in alerts)
    near = next(a["d"] for a in alerts if a["d"]["kind"] == "memory_near_full")
    assert near["reserved_b"] == 77 * GIB and near["total_b"] == 80 * GIB
    assert near["reserved_share"] == 77 / 80
    retries = next(a["d"] for a in alerts if a["d"]["kind"] == "memory_retries")
    assert retries["alloc_retries"] == 3 and retries["alloc_retries_before"] == 0
    snap = latest_summary(tmp_path)
    advice = {a["kind"]: a for a in snap["advice"]}
    assert advice["fragmentation"]["evidence"][0]["value"] == 20 / 77  # (77 - 57) / 77
    assert snap["memory"]["reserved_peak_b"] == 77 * GIB
    assert "mem peak 77.0 GiB of 80.0 GiB" in ours.stderr


def test_a_segfault_leaves_every_threads_python_stack_in_the_run_directory(tmp_path: Path) -> None:
    ours, end, snap = _same_death("segfault", tmp_path, RANK="1", WORLD_SIZE="2")
    assert ours.returncode == 128 + signal.SIGSEGV
    assert end.startswith("trainmeter: crashed in native code: Segmentation fault (rank 1); ")
    stack = run_dirs(tmp_path)[-1] / snap["death"]["stack_file"]
    text = stack.read_text()
    assert text.startswith("Fatal Python error: Segmentation fault")
    assert "dies.py" in text and "trainmeter-sender" not in text  # stacks, not thread names
    assert "Thread 0x" in text  # the other threads too (the agent's sender)
    assert "crashed in native code: Segmentation fault (rank 1)" in _runs_status(tmp_path)


def test_the_users_own_faulthandler_is_left_alone(tmp_path: Path) -> None:
    """Their faulthandler writes to stderr as before (its thread list and addresses differ from
    a run without tm: the agent's sender is one more thread), and no file of ours is made."""
    ours = run_tm(["--no-web", DIES, "segfault"], tmp_path, env=_env(PYTHONFAULTHANDLER="1"))
    assert ours.returncode == 128 + signal.SIGSEGV
    assert ours.stderr.startswith("Fatal Python error: Segmentation fault")  # theirs, on stderr
    snap = latest_summary(tmp_path)
    assert not list(run_dirs(tmp_path)[-1].glob("fault.*"))
    assert snap["death"]["text"] == "signal 11 (SIGSEGV)"


def test_a_self_sigkill_is_a_signal_not_a_preemption(tmp_path: Path) -> None:
    ours, end, snap = _same_death("sigkill", tmp_path)
    assert ours.returncode == 137
    assert end.startswith("trainmeter: signal 9 (SIGKILL); ")
    assert "from_outside" not in snap["death"]


def _signal_from_outside(cwd: Path, signum: int) -> tuple[int, str]:
    proc = subprocess.Popen([sys.executable, "-m", "trainmeter", "--no-web", DIES, "wait"], cwd=cwd,
                            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_signals)  # nohup hands SIGHUP down ignored
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("READY"):
            break
    time.sleep(0.5)
    proc.send_signal(signum)
    _out, err = proc.communicate(timeout=60)
    return proc.returncode, err


def test_sigterm_from_outside_is_a_preemption(tmp_path: Path) -> None:
    status, err = _signal_from_outside(tmp_path, signal.SIGTERM)
    assert status == 128 + signal.SIGTERM
    assert "trainmeter: preempted (SIGTERM); " in err
    snap = latest_summary(tmp_path)
    assert snap["death"]["from_outside"] is True and snap["death"]["cause"] == "preempted"
    assert "preempted (SIGTERM)" in _runs_status(tmp_path)


def test_sighup_is_named_not_numbered(tmp_path: Path) -> None:
    status, err = _signal_from_outside(tmp_path, signal.SIGHUP)
    assert status == 128 + signal.SIGHUP
    assert "trainmeter: signal 1 (SIGHUP); " in err
    assert "signal 1 (SIGHUP)" in _runs_status(tmp_path)


def _own_memory_cgroup() -> Path | None:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return Path("/sys/fs/cgroup/memory") / path.strip("/")
        if controllers == "" and Path("/sys/fs/cgroup/cgroup.controllers").exists():
            return Path("/sys/fs/cgroup") / path.strip("/")
    return None


def test_the_oom_killer_is_named(tmp_path: Path) -> None:
    parent = _own_memory_cgroup()
    group = parent / f"tm-oom-{os.getpid()}" if parent else None
    try:
        assert group is not None
        group.mkdir()
        limit = str(800 * 2**20)
        v1 = (group / "memory.limit_in_bytes").exists()
        (group / ("memory.limit_in_bytes" if v1 else "memory.max")).write_text(limit)
    except (OSError, AssertionError) as exc:
        pytest.skip(f"this machine gives no memory cgroup to limit ({exc!r})")
    try:
        command = f"echo $$ > {group}/cgroup.procs; exec {sys.executable} -m trainmeter --no-web {DIES} memhog"
        ours = subprocess.run(["sh", "-c", command], cwd=tmp_path, env=_env(), capture_output=True,
                              text=True, timeout=240)
    finally:
        for _ in range(50):
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.1)
    assert ours.returncode == 137
    assert "trainmeter: killed by the OOM killer; " in ours.stderr
    death = latest_summary(tmp_path)["death"]
    assert death["oom_kills"] >= 1 and group.name in death["oom_source"]
    assert "killed by the OOM killer" in _runs_status(tmp_path)


def test_a_gloo_timeout_names_the_collective_and_the_rank(tmp_path: Path) -> None:
    holder, port = reserved_port()  # held from its pick (29400 + pid % 500 was anybody's)
    try:
        torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                    "--master-port", str(port), str(SCRIPTS / "gloo_timeout.py")]
        ours = run_tm(["--no-web", *torchrun], tmp_path, env=_env())
    finally:
        holder.close()
    assert ours.returncode == 1
    assert "trainmeter: crashed: gloo timeout in all_reduce (rank 0); " in ours.stderr
    snap = latest_summary(tmp_path)
    assert undocumented(snap) == []
    death = snap["death"]
    assert death["timeout"] == {"backend": "gloo", "collective": "all_reduce"}
    assert "Timed out" in death["exception"]["message"]
    assert "crashed: gloo timeout in all_reduce (rank 0)" in _runs_status(tmp_path)


HANG_SILENCE_S = 62  # over the stuck alert's 60 s floor


@pytest.fixture
def hung_run():
    """The hang test's run, started as the session started (tests/integration/hung.py): its
    62 s of silence pass while the rest of the suite runs (the hung child sleeps and costs no
    CPU), and the test waits only for what is left of them."""
    run = hung.started()
    return run.cwd, run.proc, run.ready()




def test_a_hang_ended_by_a_timeout_says_it_hung(hung_run) -> None:
    """Steps every 0.3 s, then none; a timeout's SIGTERM after 62 s of silence (over the stuck
    alert's 60 s floor): the words say it hung, then was preempted."""
    cwd, proc, ready = hung_run
    time.sleep(max(0.0, ready + HANG_SILENCE_S - time.monotonic()))
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM
    death = latest_summary(cwd)["death"]
    assert death["hung_s"] > 60 and death["cause"] == "preempted"
    assert "without a step, then preempted (SIGTERM); " in err
    assert "without a step, then preempted (SIGTERM)" in _runs_status(cwd)
