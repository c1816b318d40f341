"""The cause of death from records, worked by hand: which cause wins, the words, the sizes."""

from __future__ import annotations

from trainmeter.engine import Engine
from trainmeter.engine.death import out_of_memory


def _rec(kind: str, t: float, d: dict, src: str = "tm", rank: int | None = None) -> dict:
    return {"v": 1, "t": t, "src": src, "rank": rank, "pid": 7, "kind": kind, "d": d}


def _run(*records: dict) -> dict:
    e = Engine()
    e.feed(_rec("run.start", 0.0, {"name": "x"}))
    for r in records:
        e.feed(r)
    return e.snapshot()


def _steps(n: int, every: float) -> list[dict]:
    return [_rec("step", 1.0 + i * every, {"k": 1, "tokens": 8}, "agent", 0) for i in range(n)]


def test_a_run_that_ended_well_has_no_death() -> None:
    snap = _run(_rec("crash", 1.0, {"type": "KeyError", "message": "x"}, "agent", 0),
                _rec("run.end", 2.0, {"exit_status": 0, "signal": None}))
    assert "death" not in snap


def test_the_earliest_rank_wins_over_the_launcher_and_later_ranks() -> None:
    snap = _run(
        _rec("crash", 5.0, {"type": "ValueError", "message": "late"}, "agent", 0),
        _rec("crash", 4.0, {"type": "ValueError", "message": "first\nsecond line"}, "agent", 2),
        _rec("crash", 3.0, {"type": "x.ChildFailedError", "message": "launcher"}, "agent", None),
        _rec("run.end", 6.0, {"exit_status": 1, "signal": None}),
    )
    assert snap["death"]["text"] == "crashed: ValueError: first (rank 2)"
    assert snap["death"]["rank"] == 2


def test_the_oom_killer_comes_before_everything() -> None:
    snap = _run(_rec("crash", 1.0, {"type": "ValueError", "message": "x"}, "agent", 0),
                _rec("run.end", 2.0, {"exit_status": 137, "signal": 9, "oom_kills": 1,
                                      "oom_source": "/sys/fs/cgroup/memory.events"}))
    assert snap["death"]["text"] == "killed by the OOM killer"
    assert snap["death"]["oom_kills"] == 1


def test_signals_in_words() -> None:
    def text(d: dict) -> str:
        return _run(_rec("run.end", 2.0, d))["death"]["text"]

    assert text({"exit_status": 143, "signal": 15}) == "preempted (SIGTERM)"
    assert text({"exit_status": 137, "signal": 9, "signal_from": "outside"}) == "killed (SIGKILL)"
    assert text({"exit_status": 137, "signal": 9}) == "signal 9 (SIGKILL)"
    assert text({"exit_status": 129, "signal": 1, "signal_from": "outside"}) == "signal 1 (SIGHUP)"
    assert text({"exit_status": 2, "signal": None}) == "exit 2"


def test_a_hang_ended_by_a_timeout() -> None:
    """Steps every 0.5 s, then none for 100 s: over max(10 x 0.5, 60) s, so a hang."""
    snap = _run(*_steps(6, 0.5), _rec("run.end", 103.5, {"exit_status": 143, "signal": 15,
                                                         "signal_from": "outside"}))
    assert snap["death"]["hung_s"] == 100.0  # 103.5 - (1.0 + 5 * 0.5)
    assert snap["death"]["text"] == "hung 1m40s without a step, then preempted (SIGTERM)"
    short = _run(*_steps(6, 0.5), _rec("run.end", 30.0, {"exit_status": 143, "signal": 15}))
    assert short["death"]["text"] == "preempted (SIGTERM)"  # 26.5 s: under the 60 s floor


def test_nccl_watchdog_text_gives_the_collective() -> None:
    message = ("[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, "
               "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600010 "
               "milliseconds before timing out.")
    snap = _run(_rec("crash", 1.0, {"type": "torch.distributed.DistBackendError",
                                    "message": message}, "agent", 1),
                _rec("run.end", 2.0, {"exit_status": 1, "signal": None}))
    assert snap["death"]["text"] == "crashed: nccl timeout in allreduce (rank 1)"


def test_out_of_memory_sizes_in_mib() -> None:
    oom = out_of_memory("CUDA out of memory. Tried to allocate 20.00 MiB. GPU 3 has a total "
                        "capacity of 15.77 GiB of which 3.12 MiB is free.")
    assert oom == {"tried_b": 20 * 2**20, "total_b": int(15.77 * 2**30),
                   "free_b": int(3.12 * 2**20), "gpu": 3}


def test_ctrl_c_is_an_interruption_not_a_crash() -> None:
    snap = _run(_rec("crash", 1.0, {"type": "KeyboardInterrupt", "message": ""}, "agent", 0),
                _rec("run.end", 2.0, {"exit_status": 130, "signal": 2}))
    assert snap["death"]["text"] == "interrupted (Ctrl-C)"
    assert snap["death"]["cause"] == "interrupted"


LAUNCHER = """
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-04_15:26:17
  host      : localhost
  rank      : 2 (local_rank: 2)
  exitcode  : -9 (pid: 25321)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 25321
============================================================"""


def test_only_torchrun_spoke_its_root_cause_names_the_rank() -> None:
    failed = _rec("crash", 1.0, {"type": "torch.distributed.elastic.multiprocessing.errors."
                                 "ChildFailedError", "message": LAUNCHER}, "agent", None)
    snap = _run(failed, _rec("run.end", 2.0, {"exit_status": 1, "signal": None}))
    assert snap["death"]["text"] == "crashed: a worker failed, signal 9 (SIGKILL) (rank 2)"
    assert snap["death"]["rank"] == 2
    snap = _run(failed, _rec("run.end", 2.0, {"exit_status": 1, "signal": None, "oom_kills": 1,
                                              "oom_source": "memory.events"}))
    assert snap["death"]["text"] == "killed by the OOM killer (rank 2)"
