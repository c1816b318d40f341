"""The FLOPs conventions are one registry (engine/flops.py): a convention registered in one
place is a `--convention` choice, a line of `tm --help`, a key of the snapshot's conventions, a
bound of the range when none is chosen, an MFU under `mfu.by_convention`, and a row in every
view; docs/flops.md's table is the registry's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from trainmeter.engine import flops
from trainmeter.engine.flops import Convention

from .build import device, hello, run, start, steps
from .test_budget import SHAPE

DOC = Path(__file__).resolve().parents[2] / "docs" / "flops.md"
H100_PEAK = 989.5e12
# The reference shape (test_flops.REF) under all_params: 6 x 1,039,000,000 + 12 x 18 x 2048 x
# 1024 = 6,686,984,832 FLOP/token; the test convention counts twice that, 13,373,969,664, so
# it is the range's top. hf, 5,831,346,816, stays its bottom.
ALL_PARAMS = 6_686_984_832.0
TWICE = 2 * ALL_PARAMS
HF = 5_831_346_816.0


@pytest.fixture
def twice():
    """A convention registered by this test alone, taken out again after it."""
    conv = flops.register(Convention(
        "twice",
        formula="2·(6·N_act + 12·H·Q·Σ_l T_l)",
        source="a convention of this test: all_params counted twice",
        counts="everything all_params counts, twice",
        per_token=lambda s: 2 * flops.flops_per_token(s, "all_params"),
        expression=lambda s: f"2 * ({flops.get('all_params').expression(s)})",
    ))
    yield conv
    flops.unregister("twice")
    assert "twice" not in flops.names()


def eight_h100s(**declared):
    """8 ranks on 8 H100s, 62,500 tokens a step each, one step a second: 500,000 tok/s."""
    return [
        start(0.0, **SHAPE, **declared),
        hello(0.1, world_size=8),
        *[device(0.2, index=i, rank=i) for i in range(8)],
        steps(1.0, 1.0, 6, tokens=62_500),
    ]


def test_a_registered_convention_is_a_command_line_choice(twice):
    from trainmeter.cli.args import UsageError, parse_run_args, usage

    assert parse_run_args(["--convention", "twice", "t.py"]).declared["convention"] == "twice"
    line = next(x for x in usage().splitlines() if x.startswith("  --convention"))
    assert line.split()[1] == "{titan,megatron,hf,all_params,twice}"
    assert line.index("the FLOPs convention") == 63  # the help's column, as the other lines
    with pytest.raises(UsageError, match="not one of titan, megatron, hf, all_params, twice"):
        parse_run_args(["--convention", "chinchilla", "t.py"])


def test_a_registered_convention_is_in_the_range_and_per_convention_mfu(twice):
    snap = run(eight_h100s())
    assert snap["conventions"]["twice"] == TWICE
    assert snap["convention_formulas"]["twice"] == "2·(6·N_act + 12·H·Q·Σ_l T_l)"
    assert snap["flops_per_token"]["range"] == [HF, TWICE]
    # MFU = FLOPs per token x 500,000 tok/s / (8 x 989.5e12): twice 0.844743, hf 0.368327
    lo, hi = snap["mfu"]["range"]
    assert (lo, hi) == (pytest.approx(0.368327, abs=1e-6), pytest.approx(0.844743, abs=1e-6))
    assert snap["mfu"]["by_convention"]["twice"] == pytest.approx(TWICE * 5e5 / (8 * H100_PEAK))
    assert "--convention titan|megatron|hf|all_params|twice" in snap["absent"]["flops_spent"]


def test_a_registered_convention_can_be_chosen_and_explained(twice):
    snap = run(eight_h100s(convention="twice"))
    fpt = snap["flops_per_token"]
    assert (fpt["value"], fpt["convention"]) == (TWICE, "twice")
    assert fpt["formula"] == "2·(6·N_act + 12·H·Q·Σ_l T_l)"
    how = snap["explain"]["flops_per_token"]
    assert how["formula"] == "2 * (6 * N + 12 * L * d * T)"
    assert how["note"].endswith("a convention of this test: all_params counted twice")
    got = {i["name"]: i["value"] for i in how["inputs"]}
    assert 2 * (6 * got["N"] + 12 * got["L"] * got["d"] * got["T"]) == TWICE  # redone by hand
    assert snap["mfu"]["value"] == pytest.approx(TWICE * 5e5 / (8 * H100_PEAK))
    assert snap["flops_spent"] == pytest.approx(TWICE * 3_000_000)


def test_a_registered_convention_is_in_every_view(twice):
    from trainmeter.exporters.prometheus import render
    from trainmeter.views.format import percent, si_unit
    from trainmeter.views.passport_model import model_section
    from trainmeter.views.terminal_summary import summary_text

    snap = run(eight_h100s())
    text = summary_text(snap)
    row = re.escape(f"twice {si_unit(TWICE, 'FLOP')}") + r"\s+" + re.escape("2·(6·N_act + 12·H·Q·Σ_l T_l)")
    assert re.search(row, re.sub(r" +", " ", text))  # the FLOPs table's row
    assert f"twice {percent(snap['mfu']['by_convention']['twice'])}" in text  # "by convention"
    assert percent(snap["mfu"]["range"][1]) in text  # the range's top
    model = model_section(snap)
    assert list(model["conventions"])[-1] == "twice"  # lowest first: twice is the highest
    assert model["conventions"]["twice"]["flops_per_token"] == TWICE
    body = render(snap)[0].decode()
    assert re.search(r'trainmeter_mfu_by_convention_ratio\{[^}]*convention="twice"[^}]*\} 0\.84', body)


def test_the_dashboard_keeps_no_list_of_conventions_of_its_own():
    """The page lists what the snapshot carries: no convention is named in its code."""
    static = Path(__file__).resolve().parents[2] / "src" / "trainmeter" / "views" / "web" / "static"
    code = "\n".join(
        line.split("//")[0] for line in (static / "app.js").read_text().splitlines()
    )
    for name in flops.names():
        assert not re.search(rf"['\"]{name}['\"]", code), name


def test_the_docs_table_is_the_registry():
    text = DOC.read_text()
    head = "| convention | formula | what it counts | source |"
    rows = text[text.index(head):].split("\n\n")[0].splitlines()[2:]
    want = [f"| `{c.name}` | {c.formula} | {c.counts} | {c.source} |" for c in flops.REGISTRY.values()]
    assert rows == want, "docs/flops.md's table should read:\n" + "\n".join(want)


def test_a_name_is_registered_once():
    with pytest.raises(ValueError, match="already registered"):
        flops.register(Convention(
            "hf", formula="", source="", counts="", per_token=lambda s: 0.0,
            expression=lambda s: "",
        ))
    assert flops.get("hf").formula == "6(N-E_hf)"


def test_one_engine_sees_a_convention_registered_after_its_first_snapshot():
    """What follows from the facts is worked out once per version of them (`FactStore.derived`);
    a convention registered after a snapshot must reach the next one of the same engine."""
    from .build import engine_of

    engine = engine_of(eight_h100s())
    before = engine.snapshot()
    assert "twice" not in before["conventions"] and before["flops_per_token"]["range"][1] < TWICE
    flops.register(Convention(
        "twice",
        formula="2·(6·N_act + 12·H·Q·Σ_l T_l)",
        source="a convention of this test: all_params counted twice",
        counts="everything all_params counts, twice",
        per_token=lambda s: 2 * flops.flops_per_token(s, "all_params"),
        expression=lambda s: f"2 * ({flops.get('all_params').expression(s)})",
    ))
    try:
        after = engine.snapshot()
    finally:
        flops.unregister("twice")
    assert after["conventions"]["twice"] == TWICE and after["flops_per_token"]["range"] == [HF, TWICE]
    assert "twice" not in engine.snapshot()["conventions"]  # and it leaves with its removal
