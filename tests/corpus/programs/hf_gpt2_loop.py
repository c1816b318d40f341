"""A Hugging Face GPT-2 built from a tiny config (nothing downloaded), trained by a plain loop
with `input_ids=`, `labels=` and an `attention_mask`, AdamW and a linear schedule."""

import torch
import truth
from transformers import GPT2Config, GPT2LMHeadModel, get_linear_schedule_with_warmup

torch.manual_seed(0)
torch.set_num_threads(1)
B, T, STEPS = 2, 12, 4
cfg = GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=2, n_head=2)
model = GPT2LMHeadModel(cfg)
model.train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
sched = get_linear_schedule_with_warmup(opt, 1, STEPS)
tokens = 0
for step in range(STEPS):
    ids = torch.randint(0, cfg.vocab_size, (B, T))
    out = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=ids)
    tokens += ids.numel()
    out.loss.backward()
    opt.step()
    sched.step()
    opt.zero_grad()
    truth.loss(step, out.loss)
truth.report(
    model,
    steps=STEPS,
    tokens=tokens,
    samples_per_step=B,
    L=cfg.n_layer,
    d=cfg.n_embd,
    T=T,
    N=truth.params(model),
    E=cfg.n_positions * cfg.n_embd,
)
