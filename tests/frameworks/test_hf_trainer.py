"""HF `Trainer` on a tiny GPT-2 under the real `tm`: shape, tokens, steps, FLOPs, loss, and a run
that is bit-identical to the same run without trainmeter."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..conftest import latest_summary, run_dirs
from .conftest import metric_records, run_pair

pytest.importorskip("transformers")
pytest.importorskip("accelerate")  # Trainer needs it with PyTorch

pytestmark = pytest.mark.slow

# Ground truth, by hand, for GPT2Config(n_layer=2, n_embd=64, vocab_size=256, n_positions=64):
#   wte 256*64 = 16384 (tied to the LM head), wpe 64*64 = 4096
#   one block: ln_1 128 + c_attn 64*192+192 = 12480 + attn c_proj 64*64+64 = 4160 + ln_2 128
#              + c_fc 64*256+256 = 16640 + mlp c_proj 256*64+64 = 16448  -> 49984
#   N = 16384 + 4096 + 2*49984 + ln_f 128 = 120576
#   E = 4096 (wpe only: wte is the tied head, a matmul weight)    N - E = 116480
#   L = 2, d = 64, T = 32, tokens per step = 4 * 32 = 128
N, E, L, D, T = 120576, 4096, 2, 64, 32
#   hf drops every nn.Embedding as HF's num_parameters(exclude_embeddings=True) does: wte and wpe
#   (E_hf = 20480); megatron leaves out the one-dimensional weights: a block's ln_1 128, c_attn
#   bias 192, attn c_proj bias 64, ln_2 128, c_fc bias 256, mlp c_proj bias 64 = 832; two 1664,
#   + ln_f 128 = V = 1792
FLOPS_PER_TOKEN = {
    "hf": 600576.0,  # 6 * (120576 - 20480) = 6 * 100096
    "megatron": 712704.0,  # 6 * (116480 - 1792) + 6*2*64*32 = 688128 + 24576
    "titan": 748032.0,  # 6 * 116480 + 12*2*64*32 = 698880 + 49152
    "all_params": 772608.0,  # 6*120576 + 49152 = 723456 + 49152
}


def test_gpt2_under_trainer(workdir: Path) -> None:
    ran, under = run_pair(workdir, "hf_gpt2.py", [], ["--no-web"])
    plain = ran.check().answer
    # the script's own count agrees with the hand count above
    assert (plain["n_params"], plain["n_embedding_params"]) == (N, E)
    assert (plain["n_layers"], plain["d_model"], plain["seq_len"]) == (L, D, T)

    answer = under.check().answer
    # promise 1: the same losses and the same final weights, to the last bit
    assert answer["losses"] == plain["losses"]
    assert answer["weights"] == plain["weights"]

    summary = latest_summary(workdir)
    facts = summary["facts"]
    assert facts["n_params"]["value"] == N
    assert facts["n_embedding_params"]["value"] == E
    assert facts["n_layers"]["value"] == L
    assert facts["d_model"]["value"] == D
    assert facts["seq_len"]["value"] == T
    assert summary["steps"] == 4
    assert summary["tokens_seen"] == 4 * 128
    assert summary["conventions"] == FLOPS_PER_TOKEN
    assert summary["flops_per_token"]["range"] == [600576.0, 772608.0]
    # the hf convention is HF's own count: Trainer.state.total_flos = 6 x tokens x
    # num_parameters(exclude_embeddings=True) = 600576 x 512 = 307,494,912
    assert plain["total_flos"] == summary["conventions"]["hf"] * summary["tokens_seen"]
    assert plain["total_flos"] == 307_494_912

    # the loss curve: tapped from Trainer.log, equal to trainer.state.log_history
    loss = summary["series"]["train_loss"]
    assert (loss["source"], loss["via"], loss["key"], loss["count"]) == (
        "tapped",
        "transformers",
        "loss",
        4,
    )
    assert loss["value"] == float.fromhex(plain["losses"][-1][1])
    metrics = metric_records(run_dirs(workdir)[-1])
    losses = [[m["step"], float(m["value"]).hex()] for m in metrics if m["key"] == "loss"]
    assert losses == plain["losses"]
    assert {m["via"] for m in metrics} == {"transformers"}
    # the end-of-training mean is not a point of the curve
    assert all(m["key"] != "train_loss" for m in metrics)
