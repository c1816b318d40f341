"""nanoGPT shape: a GPT with a config dataclass (n_layer, n_embd, block_size), hand-written
causal self-attention, AdamW, gradient accumulation over several micro-batches per step, an
evaluation every other step with the model in eval mode."""

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
import truth

torch.manual_seed(0)
torch.set_num_threads(1)
ACCUM, B, STEPS = 3, 2, 4


@dataclass
class GPTConfig:
    block_size: int = 12
    vocab_size: int = 48
    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 16


class CausalSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_attn = nn.Linear(c.n_embd, 3 * c.n_embd)
        self.c_proj = nn.Linear(c.n_embd, c.n_embd)
        self.n_head = c.n_head

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(c.n_embd), nn.LayerNorm(c.n_embd)
        self.attn = CausalSelfAttention(c)
        self.mlp = nn.Sequential(
            nn.Linear(c.n_embd, 4 * c.n_embd), nn.GELU(), nn.Linear(4 * c.n_embd, c.n_embd)
        )

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.config = c
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(c.vocab_size, c.n_embd),
                wpe=nn.Embedding(c.block_size, c.n_embd),
                h=nn.ModuleList(Block(c) for _ in range(c.n_layer)),
                ln_f=nn.LayerNorm(c.n_embd),
            )
        )
        self.lm_head = nn.Linear(c.n_embd, c.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # tied

    def forward(self, idx, targets=None):
        t = idx.size(1)
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(t))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


cfg = GPTConfig()
model = GPT(cfg)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
tokens = 0
for step in range(STEPS):
    for _micro in range(ACCUM):
        x = torch.randint(0, cfg.vocab_size, (B, cfg.block_size))
        _, loss = model(x, x)
        tokens += x.numel()
        (loss / ACCUM).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    truth.loss(step, loss)
    if step % 2 == 1:
        model.eval()
        with torch.no_grad():
            model(torch.randint(0, cfg.vocab_size, (B, cfg.block_size)))
        model.train()
truth.report(
    model,
    steps=STEPS,
    tokens=tokens,
    samples_per_step=B * ACCUM,
    L=cfg.n_layer,
    d=cfg.n_embd,
    T=cfg.block_size,
    N=truth.params(model),
    E=cfg.block_size * cfg.n_embd,
)
