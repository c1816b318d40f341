"""Counted FLOPs of one real step, against the tiny LM's matmuls worked out by hand.

Per token, forward: 2 FLOPs per multiply-add of each matmul (embeddings are lookups, no FLOPs)
  blocks: 2 * (fc1 16*64 + fc2 64*16) * 2 layers = 8192, head: 2 * 16*64 = 2048 -> 10240
Training (forward + backward, the backward has two matmuls per forward one): 3 * 10240 = 30720
"""

from __future__ import annotations

import pytest

from conftest import SCRIPTS, run_agent, run_tiny_lm, run_tiny_lm_pair

PER_TOKEN = 30720.0

pytestmark = pytest.mark.slow  # every test here starts processes (the fast lane's rule)

#: The tests that read one run of their own under the agent: made two at a time (see
#: runs_two_at_a_time), each test asserting on its own as before.
SINGLES = {
    "test_counted_flops_for_a_plain_model":
        lambda cwd: run_tiny_lm(cwd, "--steps", "4", "--accum", "2"),
    "test_too_few_steps_leaves_no_count": lambda cwd: run_tiny_lm(cwd, "--steps", "2"),
    "test_a_worker_forked_during_the_counted_step_does_not_count":
        lambda cwd: run_agent(["python", str(SCRIPTS / "fork_in_window.py")], cwd),
}


def test_counted_flops_for_a_plain_model(run):
    assert run.rc == 0, run.stderr
    facts = run.fact_records("counted_flops_per_token")
    assert len(facts) == 1
    assert facts[0]["d"]["source"] == "measured"
    assert facts[0]["d"]["value"] == PER_TOKEN
    assert "step 3" in facts[0]["d"]["note"]
    assert "flops" in run.probes()


def _graphs(run) -> list[str]:
    return [line for line in run.stdout.splitlines() if line.startswith("TRUTH_GRAPHS")]


@pytest.mark.parametrize(
    "how",
    [
        ("--compile", "eager"),
        ("--compile-in-place", "eager"),
        pytest.param(("--compile", "inductor"), marks=pytest.mark.slow),
    ],
)
def test_counted_flops_for_a_compiled_model_or_a_reason(workdir, how):
    flags = ("--steps", "4", *how, "--dropout", "0.1")
    run, plain = run_tiny_lm_pair(workdir, *flags)
    assert run.rc == 0, run.stderr
    facts = run.facts()
    if "counted_unavailable" in facts:
        assert facts["counted_unavailable"]  # a reason, not an empty string
    else:
        assert facts["counted_flops_per_token"] == PER_TOKEN
        assert "fake-tensor" in run.fact_records("counted_flops_per_token")[0]["d"]["note"]
    # same losses (dropout included: the fake count drew no random numbers), and the agent's
    # hooks made dynamo compile no extra graph
    assert run.losses() == plain.losses()
    assert _graphs(run) == _graphs(plain) == ["TRUTH_GRAPHS unique_graphs=1"]


def test_too_few_steps_leaves_no_count(run):
    assert run.rc == 0, run.stderr
    assert "counted_flops_per_token" not in run.facts()


def test_a_worker_forked_during_the_counted_step_does_not_count(run):
    # fork_in_window.py: Embedding(10, 4) + Linear(4, 10): 6 * 4 * 10 = 240 FLOPs per token
    assert run.rc == 0, run.stderr
    assert len(run.losses()) == 6
    assert "MODE ACTIVE" not in run.stdout
    assert run.facts()["counted_flops_per_token"] == 240
