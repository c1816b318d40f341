"""A mixture of experts whose experts run through `torch._grouped_mm`: Hugging Face Transformers
5's Mixtral (its default experts implementation, `grouped_mm`: tokens sorted by expert, one
grouped matmul for every expert's up projection and one for the down projection), a plain loop
with AdamW. Eager attention, so every matmul of the step is an ordinary one.

The program works out what one training step executes, per token (2 FLOPs a multiply-add;
backward = two matmuls per forward one, since every activation needs its gradient: the
embedding's output feeds the first projection):
  per layer, projections: q, o (d x d), k, v (d x kv·hd), the router (d x E), the experts each
  token visits (top_k x (d x 2f + f x d)); attention: q·kᵀ and p·v, 2 x 2 x T x d forward;
  the head: d x V.
  training = 3 x 2 x (matrices) + 3 x attention (forward + its four backward matmuls).
"""

import torch
import truth
from transformers import MixtralConfig, MixtralForCausalLM

torch.manual_seed(0)
torch.set_num_threads(1)
B, T, STEPS, V = 2, 8, 4, 64
D, F, L, H, KV, E, K = 16, 32, 2, 4, 2, 4, 2

cfg = MixtralConfig(
    vocab_size=V,
    hidden_size=D,
    intermediate_size=F,
    num_hidden_layers=L,
    num_attention_heads=H,
    num_key_value_heads=KV,
    num_local_experts=E,
    num_experts_per_tok=K,
    max_position_embeddings=32,
)
model = MixtralForCausalLM._from_config(cfg, attn_implementation="eager")
assert model.config._experts_implementation == "grouped_mm", model.config._experts_implementation
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
tokens = 0
for step in range(STEPS):
    ids = torch.randint(0, V, (B, T))
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad()
    tokens += ids.numel()
    truth.loss(step, loss)

hd = D // H
matrices = L * (2 * D * D + 2 * D * KV * hd + D * E + K * (D * 2 * F + F * D)) + D * V
attention = L * 2 * 2 * T * D  # q·kᵀ and p·v per token, forward
per_token = 3 * 2 * matrices + 3 * attention
truth.report(
    model,
    steps=STEPS,
    tokens=tokens,
    N=truth.params(model),
    L=L,
    d=D,
    T=T,
    counted_flops_per_token=per_token,
)
