"""Several models trained together, in the summary, the passport and its Markdown: each model
by name with its parameters, and the total (DCGAN at pytorch/examples' defaults:
netD 2,765,568 + netG 3,576,704 = 6,342,272), from a snapshot the engine made."""

from __future__ import annotations

from tests.engine.build import fact, hello, run, start, steps
from trainmeter.views.passport import build_passport
from trainmeter.views.passport_md import render_markdown
from trainmeter.views.terminal_summary import summary_text

GAN = [
    {"name": "netD", "class": "Discriminator", "params": 2_765_568},
    {"name": "netG", "class": "Generator", "params": 3_576_704},
]


def _snap() -> dict:
    return run(start(), hello(0.1), fact(0.2, "models", GAN), steps(1.0, 0.5, 6), now=5.0)


def test_the_summary_lists_each_model_and_the_total():
    text = summary_text(_snap())
    assert "Models trained together" in text
    assert "netD (Discriminator): 2.8M parameters" in text  # a count, by the one rule
    assert "netG (Generator): 3.6M parameters" in text
    assert "total 6.3M parameters" in text


def test_the_passport_lists_each_model_and_the_total():
    md = render_markdown(build_passport(_snap()))
    assert "### Models trained together" in md
    assert "| netD | Discriminator | 2.8M |" in md
    assert "| total | | 6.3M |" in md
