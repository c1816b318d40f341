"""Counted FLOPs of CPU attention: torch's FlopCounterMode has no formula for the CPU flash
attention ops, so the agent's counter maps them to the same batched matmuls torch counts for
the CUDA kernels.

q, k, v of shape (b=2, h=4, s=8, d=16); one batched matmul of (b*h, s, d) x (b*h, d, s) is
2 * b*h * s*d*s = 2 * 8 * 8*16*8 = 16,384 FLOPs (each of the attention matmuls here has that
size, as s_q = s_k and d_q = d_v):
  forward: scores = q k^T and out = p v:                 2 x 16,384 =  32,768
  backward: scores again, dP, dV, dQ, dK:                5 x 16,384 =  81,920
  one forward and backward:                                            114,688
"""

from __future__ import annotations

import contextlib
import copy

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from trainmeter.agent.probes import flops


def _qkv():
    g = torch.Generator().manual_seed(0)
    return [torch.randn(2, 4, 8, 16, generator=g, requires_grad=True) for _ in range(3)]


def test_plain_flop_counter_misses_cpu_attention():
    q, k, v = _qkv()
    with FlopCounterMode(display=False) as mode:
        F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
    assert mode.get_total_flops() == 0  # what the agent's note used to call "included"


def test_agent_counter_counts_cpu_attention(monkeypatch):
    monkeypatch.setattr(flops, "_torch", torch)
    monkeypatch.setattr(flops, "_counter_cls", flops._counting_mode_class())
    monkeypatch.setattr(flops, "attention_missed", None)
    q, k, v = _qkv()
    with flops.counter() as mode:
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        forward = mode.get_total_flops()
        out.sum().backward()
    assert forward == 32_768
    assert mode.get_total_flops() == 114_688
    assert flops.attention_missed is None
    assert "attention in full" in flops.NOTE and "softmax work not counted" in flops.NOTE


def test_a_shape_the_formula_cannot_read_counts_zero_and_says_attention_is_excluded(
    monkeypatch,
):
    monkeypatch.setattr(flops, "attention_missed", None)

    def broken(*args):
        raise AssertionError("incompatible shapes")

    monkeypatch.setattr(flops, "_sdpa", (broken, broken))
    assert flops._cpu_attention((2, 4, 8, 16), (2, 4, 8, 16), (2, 4, 8, 16)) == 0
    assert "not counted" in flops.attention_missed


def test_the_counted_step_computes_bit_for_bit_what_it_would_without_the_counter(monkeypatch):
    """Promise 1. torch's FlopCounterMode enters a ModuleTracker whose hooks add autograd nodes:
    on a tiny Llama that changed the gradients' last bits (the corpus program `hf_trainer_llama`
    ended with other weights under tm). The agent's counting mode only reads shapes."""
    transformers = pytest.importorskip("transformers")
    monkeypatch.setattr(flops, "_torch", torch)
    monkeypatch.setattr(flops, "_counter_cls", flops._counting_mode_class())
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
    )
    model = transformers.LlamaForCausalLM(cfg)
    ids = torch.randint(3, 64, (2, 12))
    mask = torch.ones_like(ids)
    mask[0, 8:] = 0
    labels = ids.masked_fill(mask == 0, -100)

    def grads(mode=None):
        m = copy.deepcopy(model)
        with mode if mode is not None else contextlib.nullcontext():
            m(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()
        return [p.grad for p in m.parameters()], mode

    plain, _ = grads()
    ours, mode = grads(flops.counter())
    assert all(torch.equal(a, b) for a, b in zip(plain, ours, strict=True))
    assert mode.get_total_flops() > 0
    theirs, _ = grads(FlopCounterMode(display=False))
    # what the agent used before: not the same bits (if torch ever changes that, this says so)
    assert not all(torch.equal(a, b) for a, b in zip(plain, theirs, strict=True))
