"""FLOPs per token under each convention, pinned against the 1.04B reference model."""

from __future__ import annotations

import pytest

from trainmeter.engine.flops import CONVENTIONS, ModelShape, all_conventions, flops_per_token

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
    assert CONVENTIONS["megatron"][0] == "6(N_act-E-R-V) + 6·H·Q·Σ_l T_l"
    assert set(CONVENTIONS) == {"titan", "megatron", "hf", "all_params"}
