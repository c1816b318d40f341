"""The architecture probe on real models built from configs in code (nothing downloaded), and
the engine's FLOPs from what it detects, against counts and formulas worked out by hand."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
nn = torch.nn

from tests.engine.build import fact, hello, run, start  # noqa: E402

from trainmeter.agent.probes import architecture, model  # noqa: E402
from trainmeter.engine.flops import ModelShape, all_conventions  # noqa: E402

architecture._torch = torch
model._torch = torch


class Collect:
    def __init__(self) -> None:
        self.facts: dict[str, object] = {}

    def send(self, kind: str, d: dict) -> None:
        assert kind == "fact" and d["source"] == "detected"
        self.facts[d["key"]] = d["value"]


def detect(monkeypatch, root, **kwargs) -> dict[str, object]:
    """Run the probe's first-forward callback on `root` and return the facts it sent, with
    N, E, L, d, T as the model probe reads them."""
    sink = Collect()
    monkeypatch.setattr(architecture, "get_sender", lambda: sink)
    ids = kwargs.pop("input_ids", torch.zeros(1, 8, dtype=torch.long))
    architecture.on_first_forward(root, ids, (), {"input_ids": ids, **kwargs})
    n, e, _frozen = model.count_params(root)
    config = root.config
    sink.facts.update(
        n_params=n, n_embedding_params=e, seq_len=int(ids.shape[1]),
        n_layers=model.config_int(config, model.LAYER_KEYS),
        d_model=model.config_int(config, model.WIDTH_KEYS),
    )
    return sink.facts


def engine_flops(facts: dict[str, object]) -> dict[str, float]:
    snap = run(start(0.0), hello(0.1), [fact(0.2, k, v) for k, v in facts.items()])
    return snap["conventions"]


# -- 1. HF drops every nn.Embedding; nanoGPT drops position tables ---------------------------
# A tied GPT-2 shape: V 96, T 32, d 64, L 2, biases. A block: ln_1 128, c_attn 64·192 + 192 =
# 12,480, c_proj 4096 + 64 = 4,160, ln_2 128, c_fc 64·256 + 256 = 16,640, c_proj 16,384 + 64 =
# 16,448 -> 49,984; two: 99,968. wte 96·64 = 6,144 (tied to the head), wpe 32·64 = 2,048,
# ln_f 128: N = 108,288. E (lookup-only) = wpe = 2,048; every nn.Embedding = 8,192.
#   hf (HF's rule):  6 x (108,288 - 8,192) = 600,576
#   ours before:     6 x (108,288 - 2,048) = 637,440 (+6%)
#   all_params (PaLM): 6 x 108,288 + 12 x 2 x 64 x 32 = 649,728 + 49,152 = 698,880
#   nanoGPT estimate_mfu: 6 x (N - wpe) + 12·L·H·Q·T = 637,440 + 49,152 = 686,592


def gpt2_tied():
    config = transformers.GPT2Config(
        vocab_size=96, n_positions=32, n_embd=64, n_layer=2, n_head=4, tie_word_embeddings=True
    )
    return transformers.GPT2LMHeadModel(config)


def test_hf_convention_is_what_hf_counts(monkeypatch):
    net = gpt2_tied()
    facts = detect(monkeypatch, net, input_ids=torch.zeros(1, 32, dtype=torch.long))
    assert (facts["n_params"], facts["n_embedding_params"], facts["n_lookup_params"]) == (
        108_288, 2_048, 8_192,
    )
    # HF's own count, the one its Trainer multiplies by 6 x tokens
    assert net.num_parameters(exclude_embeddings=True) == 108_288 - 8_192
    conventions = engine_flops(facts)
    assert conventions["hf"] == 600_576
    assert conventions["all_params"] == 698_880
    assert conventions["titan"] == 686_592  # = nanoGPT's estimate_mfu on this model
    # the shape with no E_hf known (declared) keeps E: 637,440
    declared = ModelShape(108_288, 2_048, 2, 64, 32)
    assert all_conventions(declared)["hf"] == 637_440


# -- 3. Mixture of experts ------------------------------------------------------------------
# Mixtral-shaped: V 64, d 16, FFN 24, L 2, 4 heads of 4, 2 KV heads, 4 experts, top-2, untied.
# A layer: q 256, k 128, v 128, o 256 = 768; experts gate_up 4·48·16 = 3,072, down 4·16·24 =
# 1,536 -> routed 4,608; router 4·16 = 64; two RMSNorm 32 -> 5,472; two layers 10,944.
# wte 1,024, head 1,024, norm 16: N = 13,008, E = 1,024, routed 9,216, router 128, V = 80.
#   N_act = 13,008 - 9,216 x (1 - 2/4) = 8,400
#   titan (T 8):    6 x (8,400 - 1,024) + 12 x 2 x 16 x 8 = 44,256 + 3,072 = 47,328
#   megatron:       6 x (8,400 - 1,024 - 128 - 80) + 6 x 2 x 16 x 8 = 43,008 + 1,536 = 44,544
#   Megatron-LM's own terms: projections 6·L·h·(2·16 + 2·8) = 9,216; routed SwiGLU
#   6·L·h·24·top_k·3 = 27,648; logits 6·16·64 = 6,144; core 6·L·h·T = 1,536 -> 44,544
#   hf (every expert, as HF counts): 6 x (13,008 - 1,024) = 71,904


def mixtral():
    config = transformers.MixtralConfig(
        vocab_size=64, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, num_local_experts=4,
        num_experts_per_tok=2, max_position_embeddings=64, sliding_window=None,
    )
    return transformers.MixtralForCausalLM(config)


def test_mixtral_counts_active_experts(monkeypatch):
    facts = detect(monkeypatch, mixtral())
    assert facts["n_params"] == 13_008 and facts["n_embedding_params"] == 1_024
    assert (facts["moe_routed_params"], facts["moe_router_params"]) == (9_216, 128)
    assert (facts["moe_experts"], facts["moe_top_k"], facts["n_vector_params"]) == (4, 2, 80)
    assert "moe_shared_params" not in facts
    conventions = engine_flops(facts)
    assert conventions["titan"] == 47_328
    assert conventions["megatron"] == 44_544
    assert conventions["hf"] == 71_904


def test_moe_total_is_shown_beside_active(monkeypatch):
    facts = detect(monkeypatch, mixtral())
    snap = run(
        start(0.0, convention="titan"), hello(0.1), [fact(0.2, k, v) for k, v in facts.items()]
    )
    assert snap["flops_per_token"]["params"] == {"total": 13_008, "active": 8_400}
    assert snap["flops_per_token"]["value"] == 47_328
    entry = snap["explain"]["flops_per_token"]
    assert entry["formula"] == "6 * ((N - routed * (1 - top_k / experts)) - E) + 12 * L * d * T"
    names = {i["name"]: i["value"] for i in entry["inputs"]}
    assert eval(entry["formula"], {"__builtins__": {}}, names) == 47_328  # noqa: S307
    assert not any("mixture of experts" in w and "too high" in w for w in snap["warnings"])


# DeepSeek-shaped: V 64, d 16, L 3 (the first dense), 4 heads, MLA with q/kv LoRA rank 8,
# QK 4 + rope 4, V head 4; 4 routed experts of 8, 1 shared of 8, top-2, untied.
# Attention a layer: q_a 8·16 = 128, q_a_norm 8, q_b 32·8 = 256, kv_a 12·16 = 192,
# kv_a_norm 8, kv_b 32·8 = 256, o 16·16 = 256 -> 1,104.
# Dense layer: 1,104 + MLP 3·16·32 = 1,536 + norms 32 = 2,672.
# MoE layer: 1,104 + routed 4·16·16 + 4·16·8 = 1,536 + router 64 + shared 3·16·8 = 384 +
# norms 32 = 3,120; two of them 6,240. wte 1,024, head 1,024, norm 16: N = 10,976.
#   routed 3,072, N_act = 10,976 - 3,072 / 2 = 9,440; H·Q = 4 x (4 + 4 + 4) / 2 = 24
#   titan (T 8): 6 x (9,440 - 1,024) + 12 x 24 x 3 x 8 = 50,496 + 6,912 = 57,408
#   (torchtitan's deepseek_v3: 6·active + 6·L·H·(qk_head_dim + v_head_dim)·T, the same)


def deepseek():
    config = transformers.DeepseekV3Config(
        vocab_size=64, hidden_size=16, intermediate_size=32, moe_intermediate_size=8,
        num_hidden_layers=3, first_k_dense_replace=1, n_routed_experts=4, n_shared_experts=1,
        num_experts_per_tok=2, n_group=1, topk_group=1, num_attention_heads=4,
        num_key_value_heads=4, q_lora_rank=8, kv_lora_rank=8, qk_rope_head_dim=4,
        qk_nope_head_dim=4, v_head_dim=4, max_position_embeddings=64,
    )
    return transformers.DeepseekV3ForCausalLM(config)


def test_deepseek_counts_shared_and_active_routed(monkeypatch):
    facts = detect(monkeypatch, deepseek())
    assert facts["n_params"] == 10_976
    assert (facts["moe_routed_params"], facts["moe_router_params"]) == (3_072, 128)
    assert facts["moe_shared_params"] == 768
    assert (facts["moe_experts"], facts["moe_top_k"], facts["attn_width"]) == (4, 2, 24)
    assert engine_flops(facts)["titan"] == 57_408


def test_experts_from_modules_alone():
    # a hand-written MoE with no config: experts is a ModuleList, the router says its top_k
    class Router(nn.Linear):
        top_k = 1

    class Moe(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.router = Router(8, 4, bias=False)  # 32
            self.experts = nn.ModuleList(nn.Linear(8, 8, bias=False) for _ in range(4))  # 256
            self.shared_experts = nn.Linear(8, 8, bias=False)  # 64

    found = architecture.experts_of(nn.Sequential(Moe()))
    assert found == {"routed": 256, "router": 32, "shared": 64, "experts": 4, "top_k": 1}
    # a layer called "gate" with no experts beside it is not a router
    assert architecture.experts_of(nn.Sequential(nn.Linear(2, 2)))["router"] == 0


# -- 4. Windows and packing --------------------------------------------------------------------
# Gemma-2-shaped: 4 layers alternating sliding (window 16) and full, T 64, d 32, 2 heads of 8
# (H·Q = 16). Σ_l T_l = 16 + 64 + 16 + 64 = 160 (full attention would be 4 x 64 = 256).


def test_windows_from_layer_types_and_sliding_window():
    gemma = transformers.Gemma2Config(
        num_hidden_layers=4, sliding_window=16, hidden_size=32, num_attention_heads=2, head_dim=8
    )
    assert architecture.windows_of(gemma, 4) == [16, None, 16, None]
    assert architecture.attn_width(gemma) == (16, "heads x head_dim")
    qwen = transformers.Qwen2Config(
        num_hidden_layers=4, use_sliding_window=True, sliding_window=16, max_window_layers=2
    )
    assert architecture.windows_of(qwen, 4) == [None, None, 16, 16]
    assert architecture.windows_of(transformers.Qwen2Config(num_hidden_layers=4), 4) is None
    mistral = transformers.MistralConfig(num_hidden_layers=2, sliding_window=4096)
    assert architecture.windows_of(mistral, 2) == [4096, 4096]


def test_window_caps_the_attention_term_so_mfu_cannot_pass_100_percent():
    shape = ModelShape(1_000_000, 0, 4, 32, 64, attn_width=16, windows=(16, None, 16, None))
    # titan: 6 x 1,000,000 + 12 x 16 x 160 = 6,030,720; full would be 6,000,000 + 12·16·256
    assert all_conventions(shape)["titan"] == 6_030_720
    # a window longer than the sequence changes nothing: min(4096, 64) = 64
    wide = ModelShape(1_000_000, 0, 4, 32, 64, attn_width=16, windows=(4096,) * 4)
    assert all_conventions(wide)["titan"] == 6_000_000 + 12 * 16 * 256


def test_packed_documents_from_position_ids_and_cu_seqlens():
    # rows [0 1 2 | 0 1 2 3 4] and [0 .. 7]: documents of 3, 5 and 8 tokens
    # Σ L² / Σ L = (9 + 25 + 64) / 16 = 6.125
    pos = torch.tensor([[0, 1, 2, 0, 1, 2, 3, 4], list(range(8))])
    assert architecture.segment_len((), {"position_ids": pos})[0] == 6.125
    cu = torch.tensor([0, 3, 8, 16], dtype=torch.int32)
    assert architecture.segment_len((), {"cu_seqlens": cu})[0] == 6.125
    assert architecture.segment_len((), {"position_ids": torch.arange(8).expand(2, 8)}) is None
    # megatron counts core attention from the real lengths; titan from T, as torchtitan does
    shape = ModelShape(10_000, 0, 2, 16, 8, segment_len=6.125)
    conventions = all_conventions(shape)
    assert conventions["megatron"] == 60_000 + 6 * 16 * 2 * 6.125  # 61,176
    assert conventions["titan"] == 60_000 + 12 * 16 * 2 * 8  # 63,072
