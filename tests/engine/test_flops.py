"""FLOPs per token under each convention, pinned against the 1.04B reference model."""

from __future__ import annotations

import pytest

from trainmeter.engine.flops import ModelShape, all_conventions, flops_per_token, formulas, names

# The reference: d 2048, 18 layers, T 1024, an untied 32768 x 2048 token table, "1.04B" parameters.
# From hf = 6(N-E) ~= 5.83 G: N - E ~= 971.7 M, so N ~= 971.7 M + 67.1 M = 1.039 B.
# Pin N = 1,039,000,000:  E = 32768 * 2048 = 67,108,864,  N - E = 971,891,136
#   6(N-E) = 5,831,346,816             L*d*T = 18 * 2048 * 1024 = 37,748,736
#   6*L*d*T = 226,492,416              12*L*d*T = 452,984,832
REF = ModelShape(
    n_params=1_039_000_000, n_embedding_params=32768 * 2048, n_layers=18, d_model=2048, seq_len=1024
)


def test_reference_figures_exact():
    assert all_conventions(REF) == {
        "hf": 5_831_346_816.0,  # 6(N-E)
        "megatron": 6_057_839_232.0,  # 5,831,346,816 + 226,492,416
        "titan": 6_284_331_648.0,  # 5,831,346,816 + 452,984,832
        "all_params": 6_686_984_832.0,  # 6 * 1,039,000,000 + 452,984,832
    }


@pytest.mark.parametrize(
    "convention, reads", [("hf", 5.83), ("megatron", 6.06), ("titan", 6.28), ("all_params", 6.69)]
)
def test_reference_reads_as_spec_says(convention, reads):
    assert round(flops_per_token(REF, convention) / 1e9, 2) == reads


def test_tied_table_counts_as_matmul():
    # Tied to the head, the table is a matmul weight: E = 0, so hf = 6N.
    tied = ModelShape(1000, 0, 2, 8, 16)
    assert flops_per_token(tied, "hf") == 6000
    assert flops_per_token(tied, "titan") == 6000 + 12 * 2 * 8 * 16  # 7536


def test_unknown_convention_raises_and_formulas_are_named():
    with pytest.raises(KeyError):
        flops_per_token(REF, "counted")
    assert formulas()["megatron"] == "6(N_act-E-R-V) + 6·H·Q·Σ_l T_l"
    assert names() == ("titan", "megatron", "hf", "all_params")


def test_declared_experts_give_active_parameters_and_total_beside():
    # declared: N 7B, E 0.1B, 64 experts, top-8, 6.4B routed weights, L 16, d 2048, T 4096
    #   N_act = 7e9 - 6.4e9 x (1 - 8/64) = 7e9 - 5.6e9 = 1.4e9
    #   titan = 6 x (1.4e9 - 0.1e9) + 12 x 16 x 2048 x 4096 = 7.8e9 + 1,610,612,736
    from .build import hello, run, start

    snap = run(
        start(
            0.0, convention="titan", n_params=7e9, n_embedding_params=1e8, n_layers=16,
            d_model=2048, seq_len=4096, moe_experts=64, moe_top_k=8, moe_routed_params=6.4e9,
        ),
        hello(0.1),
    )
    fpt = snap["flops_per_token"]
    assert fpt["value"] == pytest.approx(7.8e9 + 1_610_612_736)
    assert fpt["params"] == {"total": 7_000_000_000, "active": 1_400_000_000}
    # experts without top-k: all parameters are counted and a warning says so
    snap = run(
        start(0.0, convention="titan", n_params=7e9, n_embedding_params=1e8, n_layers=16,
              d_model=2048, seq_len=4096, moe_experts=64),
        hello(0.1),
    )
    assert "params" not in snap["flops_per_token"]
    assert any("mixture of experts" in w and "--top-k" in w for w in snap["warnings"])


def test_the_note_says_what_packing_and_windows_did():
    from .build import fact, hello, run, start

    shape = dict(n_params=10_000, n_embedding_params=0, n_layers=2, d_model=16, seq_len=8)
    snap = run(
        start(0.0, convention="megatron", **shape), hello(0.1),
        fact(0.2, "segment_len", 6.125), fact(0.2, "attn_windows", [4, None]),
    )
    # megatron: 6 x 10,000 + 6 x 16 x (min(4, 6.125) + 6.125) = 60,000 + 96 x 10.125 = 60,972
    assert snap["flops_per_token"]["value"] == 60_972
    note = snap["flops_per_token"]["note"]
    assert "1 of 2 layers attend over a window" in note
    assert "real lengths" in note and "6.125 tokens, not T = 8" in note
    snap = run(start(0.0, convention="titan", **shape), hello(0.1), fact(0.2, "segment_len", 6.125))
    assert "counts attention over T, as its source does" in snap["flops_per_token"]["note"]
    assert snap["flops_per_token"]["value"] == 60_000 + 12 * 16 * 2 * 8


@pytest.mark.parametrize("convention", ["titan", "megatron", "hf", "all_params"])
def test_every_refinement_is_explained_and_redone_from_its_inputs(convention):
    # MoE (routed 6,000 of 10,000; top-2 of 8; router 80), V 100, E_hf 1,000, H·Q 24,
    # windows (4, None), packed length 5; the explanation's formula, with each input's value
    # put in place of its name, gives the number back
    from .build import fact, hello, run, start

    facts = dict(
        moe_routed_params=6000, moe_experts=8, moe_top_k=2, moe_router_params=80,
        n_vector_params=100, n_lookup_params=1000, attn_width=24, attn_windows=[4, None],
        segment_len=5.0,
    )
    snap = run(
        start(0.0, convention=convention, n_params=10_000, n_embedding_params=500, n_layers=2,
              d_model=16, seq_len=8),
        hello(0.1), [fact(0.2, k, v) for k, v in facts.items()],
    )
    entry = snap["explain"]["flops_per_token"]
    names = {i["name"]: i["value"] for i in entry["inputs"]}
    redone = eval(entry["formula"], {"__builtins__": {}}, names)  # noqa: S307
    assert redone == pytest.approx(snap["flops_per_token"]["value"], rel=1e-12)
    # by hand: N_act = 10,000 - 6,000 x 3/4 = 5,500
    by_hand = {
        "titan": 6 * (5500 - 500) + 12 * 24 * (4 + 8),  # 30,000 + 3,456
        "megatron": 6 * (5500 - 500 - 80 - 100) + 6 * 24 * (4 + 5),  # 28,920 + 1,296
        "hf": 6 * (10_000 - 1000),  # every expert, every nn.Embedding out
        "all_params": 6 * 5500 + 12 * 24 * (4 + 8),  # 33,000 + 3,456
    }
    assert snap["flops_per_token"]["value"] == by_hand[convention]
