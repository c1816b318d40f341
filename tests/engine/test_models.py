"""Several models trained together: each by name with its parameters, the total (the DCGAN of
PyTorch's examples at its defaults: netD 2,765,568 + netG 3,576,704 = 6,342,272), and no
convention's formula used for the job, with the reason; the counted step still counts."""

from __future__ import annotations

from trainmeter.engine import Engine

from .build import fact, hello, start, steps

GAN = [
    {"name": "netD", "class": "Discriminator", "params": 2_765_568},
    {"name": "netG", "class": "Generator", "params": 3_576_704},
]
SHAPE = {"n_params": 6_342_272, "n_embedding_params": 0, "n_layers": 2, "d_model": 8,
         "seq_len": 4}


def _snap(models, convention="titan", **declared) -> dict:
    engine = Engine()
    records = [start(**declared), hello(0.1, probes=("steps", "flops"))]
    records += [fact(0.2, k, v) for k, v in SHAPE.items()]
    records.append(fact(0.2, "convention", convention, "declared"))
    if models is not None:
        records.append(fact(0.3, "models", models))
    records.append(fact(0.4, "counted_flops_per_token", 5.0e7, "measured"))
    records += steps(1.0, 0.5, 6, tokens=16)
    for record in records:
        engine.feed(record)
    return engine.snapshot()


def test_each_model_its_parameters_and_the_total():
    snap = _snap(GAN)
    assert snap["models"]["trained"] == GAN
    assert snap["models"]["total_params"] == 6_342_272
    explained = snap["explain"]["models"]
    assert explained["formula"] == "netD + netG"
    assert explained["value"] == 2_765_568 + 3_576_704
    assert [i["value"] for i in explained["inputs"]] == [2_765_568, 3_576_704]
    assert "Discriminator" in explained["inputs"][0]["source"]


def test_no_convention_formula_for_the_job_and_the_reason_names_the_models():
    snap = _snap(GAN)
    assert "flops_per_token" not in snap
    reason = snap["absent"]["flops_per_token"]
    assert "2 models are trained together" in reason
    assert "netD (Discriminator) 2,765,568" in reason and "netG (Generator) 3,576,704" in reason
    assert "conventions" not in snap
    assert snap["counted"]["per_token"] == 5.0e7  # the counted step covers both
    assert "against_conventions" not in snap["counted"]


def test_a_declared_flops_per_token_still_counts():
    snap = _snap(GAN, flops_per_token=1.2e8)
    assert snap["flops_per_token"]["value"] == 1.2e8


def test_one_model_is_not_a_list():
    snap = _snap(GAN[:1])
    assert "models" not in snap
    assert snap["flops_per_token"]["convention"] == "titan"
    assert "models" not in _snap(None)


def test_a_malformed_entry_is_left_out():
    snap = _snap([*GAN, {"name": "x", "params": -1}, "junk"])
    assert snap["models"]["trained"] == GAN
