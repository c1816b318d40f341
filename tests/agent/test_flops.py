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

def _dcgan(schedule: str):
    """How the D, D, G loop's run of `schedule` (its n_critic, or D steps per G step in turn)
    is made."""
    return lambda cwd: run_agent(["python", str(SCRIPTS / "dcgan_n_critic.py"), schedule], cwd)


#: The tests that read one run of their own under the agent: made two at a time (see
#: runs_two_at_a_time), each test asserting on its own as before.
SINGLES = {
    "test_counted_flops_for_a_plain_model":
        lambda cwd: run_tiny_lm(cwd, "--steps", "4", "--accum", "2"),
    "test_too_few_steps_leaves_no_count": lambda cwd: run_tiny_lm(cwd, "--steps", "2"),
    "test_a_worker_forked_during_the_counted_step_does_not_count":
        lambda cwd: run_agent(["python", str(SCRIPTS / "fork_in_window.py")], cwd),
    **{
        f"test_a_loop_whose_steps_differ_is_counted_over_one_cycle[{k}]": _dcgan(str(k))
        for k in (2, 5)
    },
    "test_a_loop_whose_steps_repeat_with_no_period_counts_one_step_and_says_so":
        _dcgan("2,5,1,7,3,8,4"),
    "test_an_optimizer_made_that_never_steps_waits_for_the_watch_and_is_named":
        lambda cwd: run_agent(["python", str(SCRIPTS / "spare_optimizer.py")], cwd),
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


def _updates() -> tuple[int, int]:
    """dcgan_n_critic.py's FLOPs of one discriminator update and of one generator update, by
    FlopCounterMode over updates of its shapes."""
    import torch
    import torch.nn as nn
    from torch.utils.flop_counter import FlopCounterMode

    B, Z, X = 8, 6, 12
    netG = nn.Sequential(nn.Linear(Z, 32), nn.ReLU(), nn.Linear(32, X), nn.Tanh())
    netD = nn.Sequential(nn.Linear(X, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
    crit = nn.BCEWithLogitsLoss()
    with FlopCounterMode(display=False) as d_mode:
        crit(netD(torch.randn(B, X)), torch.ones(B, 1)).backward()
        fake = netG(torch.randn(B, Z))
        crit(netD(fake.detach()), torch.zeros(B, 1)).backward()
    with FlopCounterMode(display=False) as g_mode:
        crit(netD(fake), torch.ones(B, 1)).backward()
    d, g = d_mode.get_total_flops(), g_mode.get_total_flops()
    assert d > 0 and g > 0 and d != g  # the steps differ: one step would not be the average
    return d, g


def _update_flops(n_critic: int) -> float:
    """FLOPs per step of the agent's rule: a cycle of `n_critic` steps holds `n_critic`
    discriminator updates and one generator update."""
    d, g = _updates()
    return (n_critic * d + g) / n_critic


@pytest.mark.parametrize("n_critic", [2, 5])
def test_a_loop_whose_steps_differ_is_counted_over_one_cycle(run, n_critic):
    # D, D, G (and n_critic=5): each discriminator update begins a step, the generator's joins
    # one: steps alternate "D only" and "D plus G". Before, the one counted step was one of
    # them (72,192 FLOPs a step for n_critic=2 against an average of 54,528)
    assert run.rc == 0, run.stderr
    (fact,) = run.fact_records("counted_flops_per_step")
    assert fact["d"]["value"] == _update_flops(n_critic)
    first = {2: 7, 5: 13}[n_critic]  # the period is seen after 2 cycles, the window opens then
    assert f"(steps {first}-{first + n_critic - 1}: one cycle" in fact["d"]["note"]
    assert f"over {n_critic} whole steps" in fact["d"]["note"]


def test_a_loop_whose_steps_repeat_with_no_period_counts_one_step_and_says_so(run):
    # discriminator runs of 2, 5, 1, 7, 3, 8, 4 steps, each then one generator step: no
    # period of at most 8 steps in the first 18, so one step (the 19th) is counted, as before
    # the cycle was looked for, and the note says the steps differ
    assert run.rc == 0, run.stderr
    (fact,) = run.fact_records("counted_flops_per_step")
    d, g = _updates()
    assert fact["d"]["value"] in (d, d + g)  # one step's: "D only" or "D plus G"
    assert "(step 19; steps differ" in fact["d"]["note"]


def test_an_optimizer_made_that_never_steps_waits_for_the_watch_and_is_named(run):
    # a second optimizer kept for a later phase stops any period from being found (it might be
    # a generator's, stepping after n_critic steps): at the watch's end the steps are looked at
    # again without it, one step is counted with no "steps differ", and the note names it.
    # Before, the note said the steps differ
    import torch
    import torch.nn as nn
    from torch.utils.flop_counter import FlopCounterMode

    assert run.rc == 0, run.stderr
    (fact,) = run.fact_records("counted_flops_per_step")
    V, T, B = 64, 16, 4
    model = nn.Sequential(nn.Embedding(V, 32), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, V))
    with FlopCounterMode(display=False) as mode:
        x = torch.randint(0, V, (B, T))
        nn.functional.cross_entropy(model(x).view(-1, V), x.view(-1)).backward()
    assert fact["d"]["value"] == mode.get_total_flops()
    note = fact["d"]["note"]
    assert "(step 19)" in note and "steps differ" not in note
    assert "1 optimizer made in the process stepped in none of the first 18 steps" in note
    (per_token,) = run.fact_records("counted_flops_per_token")
    assert per_token["d"]["value"] == mode.get_total_flops() / (B * T)
