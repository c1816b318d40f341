"""Where the wall time went, and goodput, worked by hand."""

from __future__ import annotations

import pytest

from .build import end, hello, phase, run, start, steps

ALL = ("steps", "dataloader", "checkpoint", "eval")


def stream(probes=ALL, finished=True):
    recs = [
        start(0.0),
        hello(0.2, probes=probes),
        phase(4.5, "data", 1.0),  # loader wait before the first step: startup's
        *steps(5.0, 1.0, 10, tokens=100),  # first step record at 5, last at 14
        phase(10.0, "data", 2.0, n=4),
        phase(11.0, "checkpoint", 1.5),
        phase(12.0, "eval", 0.5),
    ]
    if finished:
        recs.append(end(16.0))
    return recs


def parts(snap):
    return {p["name"]: p for p in snap["time"]["parts"]}


def test_all_parts_measured():
    # elapsed 16; startup = 5 - 1.0 (data before the first step) = 4
    # window 5..14 = 9; data after the first step = 3 - 1 = 2; compute = 9 - 2 - 1.5 - 0.5 = 5
    # after = 16 - 14 = 2;   4 + 3 + 1.5 + 0.5 + 5 + 2 = 16 = elapsed
    snap = run(stream())
    t = snap["time"]
    p = parts(snap)
    assert t["elapsed_s"] == 16 and t["finished"] is True
    assert {k: v["s"] for k, v in p.items()} == {
        "startup": 4.0,
        "data": 3.0,
        "checkpoint": 1.5,
        "eval": 0.5,
        "compute": 5.0,
        "after": 2.0,
    }
    assert sum(v["s"] for v in p.values()) == pytest.approx(t["elapsed_s"])
    assert p["data"]["n"] == 5
    assert p["compute"]["label"] == "Compute"
    # goodput = (compute 5 + data after the first step 2) / 16
    assert t["goodput"] == pytest.approx(7 / 16)


def test_unattached_probe_stays_in_compute_and_the_label_says_so():
    snap = run(stream(probes=("steps", "dataloader")))
    p = parts(snap)
    assert p["checkpoint"] == {
        "name": "checkpoint",
        "label": "Checkpoints",
        "s": None,
        "measured": False,
        "reason": "the checkpoint probe did not attach",
    }
    assert p["eval"]["s"] is None
    assert p["compute"]["s"] == 7.0  # 9 - 2: the checkpoint and eval seconds stay inside
    assert "checkpoints" in p["compute"]["label"] and "eval" in p["compute"]["label"]
    assert snap["time"]["remainder_includes"] == ["Checkpoints", "Eval"]
    assert snap["time"]["goodput"] == pytest.approx(9 / 16)


def test_live_run_uses_now_and_has_no_after():
    snap = run(stream(finished=False), now=20.0)
    p = parts(snap)
    assert snap["time"]["elapsed_s"] == 20 and snap["time"]["finished"] is False
    assert "after" not in p
    assert p["compute"]["s"] == 15 - 2 - 1.5 - 0.5  # window 5..20


def test_phases_of_other_ranks_do_not_count():
    snap = run(stream(), phase(13.0, "checkpoint", 100.0, rank=3))
    assert parts(snap)["checkpoint"]["s"] == 1.5


def test_no_step_and_no_start_are_absent():
    snap = run(start(0.0), end(3.0))
    assert snap["time"] == {"elapsed_s": 3.0, "finished": True}
    assert "no agent" in snap["absent"]["time_split"]  # no hello: nothing could count steps
    with_agent = run(start(0.0), hello(0.5), end(3.0))
    assert "optimizer step" in with_agent["absent"]["time_split"]
    assert "time" in run(steps(1.0, 1.0, 3))["absent"]


def test_phases_before_the_first_and_after_the_last_step_come_out_of_their_own_slot():
    """A final eval and checkpoint after the last step are part of the tail, not of compute;
    an eval before the first step is part of startup. The parts still add up to elapsed."""
    snap = run(
        start(0.0),
        hello(0.2, probes=ALL),
        phase(4.5, "data", 1.0),
        phase(4.6, "eval", 0.5),  # before the first step
        *steps(5.0, 1.0, 10, tokens=100),  # 5 .. 14
        phase(10.0, "data", 2.0),
        phase(15.0, "eval", 0.5),  # after the last step
        phase(15.5, "checkpoint", 1.0),
        end(17.0),
    )
    # startup 5 - 1.0 - 0.5 = 3.5; window 9 - data 2 = compute 7; tail 3 - 0.5 - 1.0 = 1.5
    assert {k: v["s"] for k, v in parts(snap).items()} == {
        "startup": 3.5,
        "data": 3.0,
        "checkpoint": 1.0,
        "eval": 1.0,
        "compute": 7.0,
        "after": 1.5,
    }
    assert snap["time"]["goodput"] == pytest.approx((7 + 2) / 17)


def test_a_phase_never_seen_carries_why_instead_of_reading_as_a_timed_zero():
    """No save and no eval in the run: both parts say so (the views show "not measured"), and
    the parts still add up to the elapsed time."""
    recs = [start(0.0), hello(0.2, probes=ALL), phase(4.5, "data", 1.0),
            *steps(5.0, 1.0, 10, tokens=100), end(16.0)]
    p = parts(run(recs))
    assert p["checkpoint"]["s"] == 0.0 and p["checkpoint"]["n"] == 0
    assert p["checkpoint"]["reason"].startswith("nothing was saved with torch.save")
    assert p["eval"]["reason"] == "the model never went to eval() and back to train()"
    assert "reason" not in p["data"] and "reason" not in p["startup"]


def test_the_layouts_memo_sees_each_measured_phase_arrive():
    """`TimeLedger._layout` keys its memo on which phases were seen, written out by name:
    every phase of `MEASURED_PARTS` must move it (a part added to the table and not to the
    key would keep a stale layout: 'the probe saw none' after it saw some)."""
    from trainmeter.engine.timesplit import MEASURED_PARTS, TimeLedger

    probes = {probe for _, probe, _ in MEASURED_PARTS}
    ledger = TimeLedger()
    for name, _probe, _label in MEASURED_PARTS:
        before = ledger._layout(probes, 2)
        ledger.phase(name, 0.5, 1, 10.0)
        after = ledger._layout(probes, 2)
        assert after != before, name
        fresh = TimeLedger()
        fresh.phase_n = dict(ledger.phase_n)
        assert fresh._layout(probes, 2) == after, name  # as worked out with no memo
