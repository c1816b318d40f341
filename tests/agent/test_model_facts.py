"""N, E, frozen, L, d, T and experts of a real model, against counts worked out by hand.

The tiny LM (tests/agent/scripts/tiny_lm.py): V=64, T=8, d=16, L=2.
  wte 64*16 = 1024, wpe 8*16 = 128
  a block: LayerNorm 2*16 = 32, fc1 16*64+64 = 1088, fc2 64*16+16 = 1040 -> 2160; two: 4320
  ln_f 32, head 16*64 = 1024 (no bias)
  untied N = 1024 + 128 + 4320 + 32 + 1024 = 6528, E = 1024 + 128 = 1152
  tied   N = 6528 - 1024 = 5504 (the head is the token table), E = 128 (wpe only)
"""

from __future__ import annotations

import pytest

from conftest import run_tiny_lm

pytestmark = pytest.mark.slow  # every test here starts processes (the fast lane's rule)

#: Each test reads one run of its own under the agent: made two at a time (see
#: runs_two_at_a_time), each test asserting on its own as before.
SINGLES = {
    "test_untied_model_shape": lambda cwd: run_tiny_lm(cwd, "--steps", "2"),
    "test_tied_head_stays_in_n_minus_e_and_frozen_is_counted":
        lambda cwd: run_tiny_lm(cwd, "--steps", "2", "--tied", "--frozen", "--experts", "8"),
    "test_config_is_found_through_torch_compile":
        lambda cwd: run_tiny_lm(cwd, "--steps", "2", "--compile", "eager"),
}


def _detected(run) -> dict:
    assert run.rc == 0, run.stderr
    facts = {}
    for rec in run.kind("fact"):
        if rec["d"]["source"] == "detected":
            facts[rec["d"]["key"]] = rec["d"]["value"]
    return facts


def test_untied_model_shape(run):
    facts = _detected(run)
    assert facts["n_params"] == 6528
    assert facts["n_embedding_params"] == 1152
    assert facts["n_frozen_params"] == 0
    assert (facts["n_layers"], facts["d_model"], facts["seq_len"]) == (2, 16, 8)
    assert "moe_experts" not in facts
    # architecture and precision probes: every nn.Embedding (wte + wpe) = 1152; the 1-D weights:
    # a block's LayerNorm 32 + fc1 bias 64 + fc2 bias 16 = 112, two = 224, + ln_f 32 = 256
    assert (facts["n_lookup_params"], facts["n_vector_params"]) == (1152, 256)
    assert facts["matmul_precision"] == "fp32"  # FP32 weights on the CPU, no autocast
    assert "moe_routed_params" not in facts and "attn_windows" not in facts


def test_tied_head_stays_in_n_minus_e_and_frozen_is_counted(run):
    facts = _detected(run)
    assert facts["n_params"] == 5504
    assert facts["n_embedding_params"] == 128
    assert facts["n_frozen_params"] == 128  # the frozen position table
    assert facts["moe_experts"] == 8


def test_config_is_found_through_torch_compile(run):
    facts = _detected(run)
    assert (facts["n_params"], facts["n_layers"], facts["d_model"]) == (6528, 2, 16)
    assert "global hooks" not in run.stderr  # torch's warning about our hooks is silenced
