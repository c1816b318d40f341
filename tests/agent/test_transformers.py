"""A real Hugging Face model: config through `config`, tied head, padding, `save_pretrained`.

GPT-2 with V=64, 16 positions, d=16, L=2 (Conv1D layers, lm_head tied to wte):
  wte 64*16 = 1024, wpe 16*16 = 256
  a layer: ln_1 32, c_attn 16*48+48 = 816, attn.c_proj 16*16+16 = 272, ln_2 32,
           c_fc 16*64+64 = 1088, mlp.c_proj 64*16+16 = 1040  -> 3280; two: 6560
  ln_f 32; lm_head is wte (tied)      N = 1024 + 256 + 6560 + 32 = 7872, E = 256 (wpe only)
Matmul weights a token passes through: per layer 768 + 256 + 1024 + 1024 = 3072, two: 6144,
head 1024: 6 * 7168 = 43008 FLOPs per token, plus the attention scores and the weighted sum,
counted on the full square as in `titan`: 12 * L * d * T = 12 * 2 * 16 * 8 = 3072 -> 46080.
"""

from __future__ import annotations

import pytest
from tests.conftest import together

from conftest import SCRIPTS, run_agent

pytest.importorskip("transformers")


@pytest.mark.slow
def test_tiny_gpt2(workdir):
    run, plain = together(  # each saves to its own directory
        lambda: run_agent(["python", str(SCRIPTS / "hf_gpt2.py"), str(workdir / "saved")], workdir),
        lambda: run_agent(["python", str(SCRIPTS / "hf_gpt2.py"), str(workdir / "plain")], workdir,
                          agent=False),
    )
    assert run.rc == 0, run.stderr
    truth = run.truth()
    facts = run.facts()
    assert (facts["n_params"], facts["n_embedding_params"]) == (7872, 256)
    assert (facts["n_layers"], facts["d_model"], facts["seq_len"]) == (2, 16, 8)
    assert run.steps_total("k") == 4
    assert run.steps_total("tokens") == truth["tokens"] == 64
    assert run.steps_total("real_tokens") == truth["real"]
    # save_pretrained writes through safetensors' save_file: one checkpoint, counted once
    s, n = run.phase("checkpoint")
    assert n == 1 and s > 0
    assert (workdir / "saved" / "model.safetensors").exists()
    assert facts["counted_flops_per_token"] == 46080
    assert len(run.losses()) == 4 and run.losses() == plain.losses()
