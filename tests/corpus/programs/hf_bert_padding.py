"""A Hugging Face BERT for masked-LM from a tiny config, batches padded to a fixed length with
an attention_mask and -100 labels, gradient clipping, two optimizer parameter groups."""

import torch
import truth
from transformers import BertConfig, BertForMaskedLM

torch.manual_seed(0)
torch.set_num_threads(1)
B, T, STEPS = 3, 10, 4
cfg = BertConfig(
    vocab_size=50,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=64,
    max_position_embeddings=16,
)
model = BertForMaskedLM(cfg)
model.train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
tokens = real = 0
for step in range(STEPS):
    lengths = torch.randint(4, T + 1, (B,))
    mask = (torch.arange(T)[None, :] < lengths[:, None]).long()
    ids = torch.randint(5, cfg.vocab_size, (B, T)) * mask
    labels = torch.where(mask.bool(), ids, torch.full_like(ids, -100))
    out = model(input_ids=ids, attention_mask=mask, labels=labels)
    tokens += ids.numel()
    real += int(mask.sum())
    out.loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad()
    truth.loss(step, out.loss)
truth.report(
    model,
    steps=STEPS,
    tokens=tokens,
    real_tokens=real,
    samples_per_step=B,
    L=cfg.num_hidden_layers,
    d=cfg.hidden_size,
    T=T,
    N=truth.params(model),
)
