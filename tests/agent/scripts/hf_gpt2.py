"""A tiny Hugging Face GPT-2 built from a config (nothing downloaded), trained with padded
batches, labels and an attention mask, then saved with `save_pretrained`."""

from __future__ import annotations

import sys

import torch
from transformers import GPT2Config, GPT2LMHeadModel

torch.manual_seed(0)
config = GPT2Config(
    vocab_size=64, n_positions=16, n_embd=16, n_layer=2, n_head=2, bos_token_id=0, eos_token_id=0
)
model = GPT2LMHeadModel(config)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
g = torch.Generator().manual_seed(1)
real = 0
for _ in range(4):
    ids = torch.randint(1, 64, (2, 8), generator=g)
    lengths = torch.randint(3, 9, (2,), generator=g)
    mask = (torch.arange(8)[None, :] < lengths[:, None]).long()
    real += int(mask.sum())
    out = model(input_ids=ids, attention_mask=mask, labels=ids.masked_fill(mask == 0, -100))
    out.loss.backward()
    opt.step()
    opt.zero_grad()
    print("LOSS", out.loss.item().hex(), flush=True)
model.save_pretrained(sys.argv[1])
print(f"TRUTH tokens={4 * 2 * 8} real={real} steps=4 micro=4")
