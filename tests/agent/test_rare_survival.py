"""Hello, facts and phases survive a death right after them (issue 18 item 3, promise 10).

The sender ships every 50 ms; a process killed in between used to lose what it had just said
(a CI run lost the FSDP ranks' `n_params` this way). The ring keeps each rare record until it
is shipped, and `tm` logs the ones it never received, once."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.conftest import read_events, run_dirs, run_tm

SAY_AND_DIE = r"""
import os, signal, sys
from trainmeter.agent.sender import get_sender
sender = get_sender()
sender.send("fact", {"key": "n_params", "value": 123456, "source": "detected"})
sender.send("phase", {"name": "data", "s": 0.25, "n": 1})
print("SAID", flush=True)
if sys.argv[1] == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
"""


def _run(workdir: Path, how: str) -> list[dict]:
    script = workdir / "say_and_die.py"
    script.write_text(SAY_AND_DIE)
    out = run_tm(["-q", "--no-web", "--", sys.executable, str(script), how], workdir)
    assert "SAID" in out.stdout, out.stderr
    return read_events(run_dirs(workdir)[-1])


def _agent(events: list[dict], kind: str) -> list[dict]:
    return [r for r in events if r["kind"] == kind and r["src"] == "agent"]


def test_a_process_killed_at_once_loses_no_hello_fact_or_phase(workdir: Path) -> None:
    events = _run(workdir, "kill")
    hellos, phases = _agent(events, "hello"), _agent(events, "phase")
    facts = [r for r in _agent(events, "fact") if r["d"]["key"] == "n_params"]
    assert len(hellos) == 1 and len(facts) == 1 and len(phases) == 1
    assert facts[0]["d"]["value"] == 123456 and phases[0]["d"]["s"] == 0.25
    # numbered in the process in the order said: hello 1, the fact 2, the phase 3
    assert [hellos[0]["r"], facts[0]["r"], phases[0]["r"]] == [1, 2, 3]
    dropped = [r for r in _agent(events, "fact") if r["d"]["key"] == "agent_dropped_records"]
    assert not dropped  # every one of them is in the log: nothing to count as lost
    assert events[-1]["kind"] == "run.end"


def test_what_the_socket_delivered_is_not_logged_twice(workdir: Path) -> None:
    events = _run(workdir, "exit")
    said = [r for r in events if r["src"] == "agent" and r["kind"] in ("hello", "fact", "phase")]
    numbers = [r["r"] for r in said if "r" in r]
    assert sorted(numbers) == [1, 2, 3]  # each once
    assert not any(r.get("recovered") for r in said)  # all by the socket: nothing recovered


def _phase(n: int) -> dict:
    return {"v": 1, "t": float(n), "src": "agent", "rank": 0, "pid": 7, "kind": "phase",
            "d": {"name": "data", "s": 0.01, "n": 1}}


def _kept(ring) -> list[int]:
    import json

    from trainmeter.agent import ring as layout

    header = layout.read_header(ring.mm)
    return [json.loads(line)["r"] for line in layout.read_rare(ring.mm, header["h"])]


def test_shipped_records_make_room_and_unshipped_ones_stay(tmp_path: Path) -> None:
    """A long run's phases pass through the ring's two halves: what was shipped goes, what
    was not stays readable, and when even that fills the area the rest is counted."""
    from trainmeter.agent import ring as layout

    ring = layout.Ring(str(tmp_path / "ring.7"), 7, 0)
    try:
        for n in range(1, 5001):  # about 5 halves' worth, each shipped but the last 10
            ring.keep_rare(_phase(n))
            if n > 10:
                ring.rare_sent(n - 10)
        assert _kept(ring)[-10:] == list(range(4991, 5001))
        assert ring.h[layout.H_RARE_FULL] == 0 and ring.h[layout.H_RARE_LAST] == 5000
        ring.rare_sent(4990)
        first = 5001
        while ring.h[layout.H_RARE_FULL] == 0:  # nothing shipped any more: the area fills
            ring.keep_rare(_phase(first))
            first += 1
        kept = _kept(ring)
        assert kept == list(range(4991, kept[-1] + 1))  # every unshipped one, in order
        assert kept[-1] == first - 2 and ring.h[layout.H_RARE_FULL] == 1
    finally:
        ring.close()


def test_tm_logs_each_undelivered_rare_record_once_and_counts_the_rest(tmp_path: Path) -> None:
    """After the process ended: what the socket delivered is not logged again, what the ring
    kept is logged (marked recovered), and a number neither delivered nor kept is counted."""
    from trainmeter.agent import ring as layout
    from trainmeter.supervisor import ring as reader

    ring = layout.Ring(str(tmp_path / "ring.7"), 7, 0)
    try:
        records_ = [_phase(n) for n in range(1, 7)]
        for rec in records_[:4]:
            ring.keep_rare(rec)  # r = 1..4, kept
        ring.rare_room = False  # as if the area could not be reserved
        for rec in records_[4:]:
            ring.keep_rare(rec)  # r = 5, 6: numbered, not kept
        delivered = reader.Delivered()
        for rec in (records_[0], records_[2], records_[5]):  # the socket brought 1, 3 and 6
            delivered.see(rec)
        out = reader._missing(ring.mm, delivered)
    finally:
        ring.close()
    recovered = [r for r in out if r["kind"] == "phase"]
    assert [r["r"] for r in recovered] == [2, 4]
    assert all(r["recovered"] is True for r in recovered)
    [fact] = [r for r in out if r["kind"] == "fact"]
    assert fact["d"]["key"] == "agent_dropped_records" and fact["d"]["value"] == 1  # r = 5
    assert "1 rare records neither delivered nor kept" in fact["d"]["note"]


FORK_AND_DIE = r"""
import os
from trainmeter.agent.sender import get_sender
get_sender().send("fact", {"key": "n_params", "value": 1, "source": "detected"})
pid = os.fork()
if pid == 0:
    get_sender().send("fact", {"key": "n_params", "value": 2, "source": "detected"})
    os._exit(0)  # a forked worker's way out: no atexit, no flush
os.waitpid(pid, 0)
print("SAID", flush=True)
"""


def test_a_forked_child_that_leaves_by_os_exit_keeps_its_facts(workdir: Path) -> None:
    script = workdir / "fork_and_die.py"
    script.write_text(FORK_AND_DIE)
    out = run_tm(["-q", "--no-web", "--", sys.executable, str(script)], workdir)
    assert "SAID" in out.stdout, out.stderr
    events = read_events(run_dirs(workdir)[-1])
    facts = [r for r in _agent(events, "fact") if r["d"]["key"] == "n_params"]
    by_value = sorted((r["d"]["value"], r["r"]) for r in facts)
    assert by_value == [(1, 2), (2, 1)]  # each once: the parent's 2nd record, the child's 1st
    assert len({r["pid"] for r in facts}) == 2
