"""Steps, micro-batches and tokens from a real tiny training loop run under the agent."""

from __future__ import annotations

import pytest

from conftest import run_pair, run_tiny_lm, run_tiny_lm_pair

pytestmark = pytest.mark.slow  # every test here starts processes (the fast lane's rule)

#: The tests that read one run of their own under the agent: made two at a time (see
#: runs_two_at_a_time), each test asserting on its own as before.
SINGLES = {
    "test_gradient_accumulation_counts_steps_micro_and_tokens":
        lambda cwd: run_tiny_lm(cwd, "--steps", "4", "--accum", "4", "--batch", "4"),
    "test_variable_batches_and_attention_mask_give_exact_real_tokens":
        lambda cwd: run_tiny_lm(cwd, "--steps", "3", "--accum", "4", "--vary-batch", "--mask"),
    "test_labels_with_ignore_index_count_real_tokens":
        lambda cwd: run_tiny_lm(cwd, "--steps", "3", "--accum", "2", "--labels"),
    "test_two_optimizers_in_one_iteration_are_one_step":
        lambda cwd: run_tiny_lm(cwd, "--steps", "5", "--two-optimizers"),
}


def test_gradient_accumulation_counts_steps_micro_and_tokens(run):
    assert run.rc == 0, run.stderr
    steps = run.kind("step")
    # 4 optimizer steps of 4 micro-batches of 4 sequences x 8 tokens: 4 * 4 * 8 = 128 a step
    assert run.steps_total("k") == 4
    assert steps[-1]["d"]["n"] == 4
    assert run.steps_total("micro") == 16
    assert run.steps_total("tokens") == 4 * 128 == run.truth()["tokens"]
    for rec in steps:
        assert rec["d"]["tokens"] == 128 * rec["d"]["k"]
        assert rec["d"]["micro"] == 4 * rec["d"]["k"]
        assert "real_tokens" not in rec["d"]  # no mask, no labels: padding unknown, left out
    assert [r["d"]["n"] for r in steps] == sorted(r["d"]["n"] for r in steps)
    assert {"steps", "tokens"} <= run.probes()


def test_variable_batches_and_attention_mask_give_exact_real_tokens(run):
    # --steps 3 --accum 4 --vary-batch --mask:
    # micro-batch sizes cycle 1, 2, 3 sequences: 12 micro-batches hold 4 * (1+2+3) = 24
    # sequences = 192 tokens; the mask pads each sequence to 8, the loop sums it itself
    assert run.rc == 0, run.stderr
    truth = run.truth()
    assert truth["tokens"] == 192
    assert run.steps_total("tokens") == 192
    assert run.steps_total("real_tokens") == truth["real"]
    assert 0 < truth["real"] < truth["tokens"]
    assert all("real_tokens" in r["d"] for r in run.kind("step"))


def test_labels_with_ignore_index_count_real_tokens(run):
    assert run.rc == 0, run.stderr
    truth = run.truth()
    assert run.steps_total("tokens") == truth["tokens"] == 3 * 2 * 4 * 8
    assert run.steps_total("real_tokens") == truth["real"] < truth["tokens"]


def test_two_optimizers_in_one_iteration_are_one_step(run):
    assert run.rc == 0, run.stderr
    assert run.steps_total("k") == 5
    assert run.kind("step")[-1]["d"]["n"] == 5
    assert run.steps_total("tokens") == 5 * 4 * 8


def test_a_repeated_step_without_forward_counts_once_and_breaks_nothing(workdir):
    # the second optimizer.step() of each iteration has no forward before it: the agent looks
    # for the root again and finds the same model inside its next call (this once raised a
    # TypeError from torch calling our hook without its keyword arguments)
    flags = ("--steps", "4", "--accum", "2", "--double-step", "--mask")
    run, plain = run_tiny_lm_pair(workdir, *flags)
    assert run.rc == 0, run.stderr
    assert "trainmeter:" not in run.stderr
    assert run.losses() == plain.losses() and len(run.losses()) == 8
    assert run.steps_total("k") == 4
    assert run.steps_total("micro") == 8
    assert run.steps_total("tokens") == run.truth()["tokens"] == 4 * 2 * 4 * 8
    assert run.steps_total("real_tokens") == run.truth()["real"]


def test_losses_are_bit_identical_with_and_without_the_agent(workdir):
    flags = (
        "--steps",
        "5",
        "--accum",
        "2",
        "--dropout",
        "0.1",
        "--mask",
        "--eval-every",
        "2",
        "--ckpt-every",
        "3",
    )
    with_agent, without = run_tiny_lm_pair(workdir, *flags)  # each writes its ckpt3.pt
    assert with_agent.rc == without.rc == 0, with_agent.stderr
    assert with_agent.kind("step") and not without.records
    # the counted-FLOPs window (step 3) lies inside these losses
    assert "counted_flops_per_token" in with_agent.facts()
    assert len(with_agent.losses()) == 10
    assert with_agent.losses() == without.losses()


def test_a_root_compiled_in_place_is_counted_without_touching_its_graph(workdir):
    # module.compile() makes dynamo trace the module's hooks: ours must be invisible there (no
    # graph break, which fullgraph=True turns into an error, no recompile) and the micro-batches
    # and tokens are counted from outside the compiled call. This once added a graph and
    # printed dynamo warnings (`int(mask.sum())`, `time.monotonic` traced in our hooks).
    flags = ("--steps", "4", "--accum", "2", "--compile-in-place", "eager", "--fullgraph")
    flags += ("--mask", "--double-step")
    run, plain = run_tiny_lm_pair(workdir, *flags)
    assert run.rc == plain.rc == 0, run.stderr
    assert run.stderr == ""
    assert run.losses() == plain.losses() and len(run.losses()) == 8
    graphs = [line for line in run.stdout.splitlines() if line.startswith("TRUTH_GRAPHS")]
    assert graphs == ["TRUTH_GRAPHS unique_graphs=1"]
    assert run.steps_total("k") == 4
    assert run.steps_total("micro") == 8
    assert run.steps_total("tokens") == run.truth()["tokens"] == 4 * 2 * 4 * 8
    assert run.steps_total("real_tokens") == run.truth()["real"]
    assert run.facts()["n_params"] > 0


COMPILED_STEP = """
import torch
from torch import nn

torch.manual_seed(0)
m = nn.Linear(8, 8)
opt = torch.optim.AdamW(m.parameters(), lr=torch.tensor(0.01))


@torch.compile(backend="eager")
def step():
    opt.step()


for i in range(4):
    loss = m(torch.randn(4, 8)).sum()
    loss.backward()
    step()
    opt.zero_grad()
    print("LOSS", loss.item().hex())
"""


def test_a_compiled_optimizer_step_is_left_alone_and_said_so(workdir):
    # dynamo traces the optimizer's post-hooks: ours must not break its graph (it once did, at
    # `time.monotonic`, with a dynamo warning on the user's stderr). Steps cannot be counted
    # there, and the agent says so once instead of reporting nothing silently.
    script = workdir / "compiled_step.py"
    script.write_text(COMPILED_STEP)
    run, plain = run_pair(["python", str(script)], workdir)
    assert run.rc == plain.rc == 0, run.stderr
    assert run.losses() == plain.losses() and len(run.losses()) == 4
    ours = [line for line in run.stderr.splitlines() if line.startswith("trainmeter:")]
    assert ours[0].startswith("trainmeter: steps off: optimizer.step() runs inside torch.compile")
    assert "time.monotonic" not in run.stderr and "Graph break" not in run.stderr
    assert run.kind("step") == []
