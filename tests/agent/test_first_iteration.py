"""What the first iteration shows, on loops the rule was not written from: a WGAN-GP whose
generator (the root) is called twice on the same noise across the critic's step, with a gradient
penalty's interpolated batch; an R-Drop LM fed one preallocated token buffer refilled in place;
a soft actor-critic agent with twin critics, a target copy and a bare `log_alpha`; a DCGAN whose
discriminator steps twice before its generator's first step; sharpness-aware minimization, two
passes of one batch sliced anew at each forward; a lazy model's dry run on a dummy batch.

Each program counts what it fed and trained (`TRUTH`); each also runs without the agent, and the
losses must be the same bits (promise 1)."""

from __future__ import annotations

import pytest

from conftest import SCRIPTS, run_pair


def _run(workdir, name):
    run, plain = run_pair(["python", str(SCRIPTS / f"{name}.py")], workdir)
    assert run.rc == 0 and plain.rc == 0, run.stderr + plain.stderr
    assert run.losses() and run.losses() == plain.losses()
    return run


def _models(run):
    (fact,) = run.fact_records("models")
    return [(m["name"], m["params"]) for m in fact["d"]["value"]]


@pytest.mark.slow
def test_wgan_gp_one_batch_a_step_and_both_models(workdir):
    run = _run(workdir, "wgan_gp")
    truth = run.truth()
    assert run.steps_total("k") == truth["steps"]
    assert run.facts()["samples_per_step"] == truth["samples"]  # not 2x: z fed twice is one batch
    assert _models(run) == [
        ("generator", truth["generator"]), ("discriminator", truth["discriminator"])
    ]
    assert run.facts()["n_params"] == truth["generator"] + truth["discriminator"]


@pytest.mark.slow
def test_rdrop_over_a_buffer_refilled_in_place(workdir):
    run = _run(workdir, "rdrop_inplace")
    truth = run.truth()
    assert run.steps_total("k") == truth["steps"]
    assert run.steps_total("tokens") == truth["tokens"]  # each refill once, each pair once
    assert run.facts()["samples_per_step"] == truth["samples"]
    assert not run.fact_records("models")  # one model


@pytest.mark.slow
def test_an_agent_object_of_actor_critics_and_a_bare_parameter(workdir):
    run = _run(workdir, "sac_like")
    truth = run.truth()
    assert run.steps_total("k") == truth["steps"]
    assert run.facts()["samples_per_step"] == truth["samples"]
    # the target critics are never stepped: not trained, not listed
    assert _models(run) == [
        ("critic", truth["critic"]), ("actor", truth["actor"]), ("log_alpha", 1)
    ]


@pytest.mark.slow
def test_a_generator_first_stepped_after_the_first_iteration_is_listed(workdir):
    # D, D, G: the watched iteration ends as the second discriminator step begins, before the
    # generator's optimizer has stepped; before, N was the discriminator's 449 alone and no
    # `models` fact was sent
    run = _run(workdir, "dcgan_n_critic")
    truth = run.truth()
    assert run.steps_total("k") == truth["steps"]
    assert run.facts()["samples_per_step"] == truth["samples"]
    assert _models(run) == [("netD", truth["netD"]), ("netG", truth["netG"])]
    assert run.facts()["n_params"] == truth["netD"] + truth["netG"]


@pytest.mark.slow
@pytest.mark.parametrize("flag", ["", "--floats"])
def test_a_batch_sliced_again_for_a_second_pass_is_one_batch(workdir, flag):
    # SAM's two passes each take `x[:, :-1]`: a new view of the same data; before, each view
    # was a new batch (tokens 144 of 72, samples per step 6 of 3)
    run, plain = run_pair(["python", str(SCRIPTS / "sam_views.py"), *filter(None, [flag])], workdir)
    assert run.rc == 0 and plain.rc == 0, run.stderr + plain.stderr
    assert run.losses() and run.losses() == plain.losses()
    truth = run.truth()
    assert run.steps_total("k") == truth["steps"]
    assert run.steps_total("micro") == truth["steps"]  # one batch a step
    assert run.steps_total("tokens") == truth["tokens"]
    assert run.facts()["samples_per_step"] == truth["samples"]


@pytest.mark.slow
@pytest.mark.parametrize("flag", ["", "--floats"])
def test_a_dry_run_before_the_optimizer_is_made_is_no_batch(workdir, flag):
    # lazy modules materialized by `model(dummy)` before the optimizer exists; before, the dummy
    # was the first step's first batch: samples per step 2 (its one row x 2 batches) of 4, and
    # 6 tokens more than were trained on
    argv = ["python", str(SCRIPTS / "lazy_dry_run.py"), *filter(None, [flag])]
    run, plain = run_pair(argv, workdir)
    assert run.rc == 0 and plain.rc == 0, run.stderr + plain.stderr
    assert run.losses() and run.losses() == plain.losses()
    truth = run.truth()
    assert run.steps_total("k") == truth["steps"]
    assert run.steps_total("micro") == truth["steps"]
    assert run.steps_total("tokens") == truth["tokens"]
    assert run.facts()["samples_per_step"] == truth["samples"]
