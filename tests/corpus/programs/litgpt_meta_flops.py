"""litgpt's pretrain shape: a `Config` dataclass (n_layer, n_embd, block_size,
padded_vocab_size), rotary cos/sin buffers, a fused `qkv` projection, a SwiGLU MLP (`fc_1`,
`fc_2`, `proj`), RMSNorm, an untied head; the model returns logits and the loss is computed
outside it. Before training, a copy of the model built on the meta device runs a forward and a
backward under `FlopCounterMode` to measure FLOPs (in train mode, gradients on), and a sanity
validation runs under no_grad in eval mode. `model.max_seq_length` is set below the config's
block_size; batches of T + 1 ids come from a DataLoader and are sliced into inputs and targets.
Gradients accumulate over 2 iterations, decided from the iteration number; the learning rate
is set by hand each iteration."""

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
import truth
from torch.utils.data import DataLoader
from torch.utils.flop_counter import FlopCounterMode

torch.manual_seed(0)
torch.set_num_threads(1)
B, T, ACCUM, ITERS = 2, 6, 2, 8


@dataclass
class Config:
    block_size: int = 16
    padded_vocab_size: int = 40
    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 16
    intermediate_size: int = 24

    @property
    def head_size(self):
        return self.n_embd // self.n_head


class RMSNorm(nn.Module):
    def __init__(self, size, eps=1e-6):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(size)), eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def apply_rope(x, cos, sin):
    half = x.size(-1) // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


class CausalSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.qkv = nn.Linear(c.n_embd, 3 * c.n_embd, bias=False)
        self.proj = nn.Linear(c.n_embd, c.n_embd, bias=False)
        self.config = c

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        c = self.config
        q, k, v = self.qkv(x).view(b, t, 3, c.n_head, c.head_size).permute(2, 0, 3, 1, 4)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, c.n_embd))


class LLaMAMLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.fc_1 = nn.Linear(c.n_embd, c.intermediate_size, bias=False)
        self.fc_2 = nn.Linear(c.n_embd, c.intermediate_size, bias=False)
        self.proj = nn.Linear(c.intermediate_size, c.n_embd, bias=False)

    def forward(self, x):
        return self.proj(F.silu(self.fc_1(x)) * self.fc_2(x))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.norm_1, self.attn = RMSNorm(c.n_embd), CausalSelfAttention(c)
        self.norm_2, self.mlp = RMSNorm(c.n_embd), LLaMAMLP(c)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.norm_1(x), cos, sin)
        return x + self.mlp(self.norm_2(x))


class GPT(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.config = c
        self.lm_head = nn.Linear(c.n_embd, c.padded_vocab_size, bias=False)
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(c.padded_vocab_size, c.n_embd),
                h=nn.ModuleList(Block(c) for _ in range(c.n_layer)),
                ln_f=RMSNorm(c.n_embd),
            )
        )
        self.max_seq_length = c.block_size

    @property
    def max_seq_length(self):
        return self._max_seq_length

    @max_seq_length.setter
    def max_seq_length(self, value):
        self._max_seq_length = value
        pos = torch.arange(value).float()
        inv = 1.0 / (10000 ** (torch.arange(0, self.config.head_size, 2).float() / 4))
        angles = torch.outer(pos, inv).repeat(1, 2)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, idx):
        t = idx.size(1)
        x = self.transformer.wte(idx)
        for block in self.transformer.h:
            x = block(x, self.cos[:t], self.sin[:t])
        return self.lm_head(self.transformer.ln_f(x))


def chunked_cross_entropy(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))


@torch.no_grad()
def validate(model, loader, max_iters):
    model.eval()
    losses = []
    for k, batch in enumerate(loader):
        if k >= max_iters:
            break
        logits = model(batch[:, : model.max_seq_length])
        losses.append(chunked_cross_entropy(logits, batch[:, 1 : model.max_seq_length + 1]))
    model.train()
    return torch.stack(losses).mean()


def measure_flops(model, x):
    with FlopCounterMode(display=False) as counter:
        chunked_cross_entropy(model(x), x).backward()
    return counter.get_total_flops()


cfg = Config()
model = GPT(cfg)
model.max_seq_length = T  # train on sequences shorter than the context the model allows
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
data = torch.randint(0, cfg.padded_vocab_size, (B * ITERS, T + 1))
train_loader = DataLoader(data, batch_size=B, shuffle=True)
val_loader = DataLoader(data[: 2 * B], batch_size=B)
validate(model, val_loader, max_iters=2)  # sanity check before training
with torch.device("meta"):
    meta_model = GPT(cfg)
    x = torch.randint(0, 1, (B, meta_model.max_seq_length))
    flops = measure_flops(meta_model, x)
    del meta_model, x

iter_num = steps = tokens = 0
for train_data in train_loader:
    lr = 1e-3 * min(1.0, (iter_num + 1) / 4) * 0.5 * (1 + math.cos(math.pi * iter_num / ITERS))
    for group in optimizer.param_groups:
        group["lr"] = lr
    iter_num += 1
    input_ids = train_data[:, 0 : model.max_seq_length].contiguous().long()
    targets = train_data[:, 1 : model.max_seq_length + 1].contiguous().long()
    is_accumulating = iter_num % ACCUM != 0
    logits = model(input_ids)
    loss = chunked_cross_entropy(logits, targets)
    (loss / ACCUM).backward()
    tokens += input_ids.numel()
    if not is_accumulating:
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
        steps += 1
        truth.loss(steps, loss)
    if not is_accumulating and steps % 2 == 0:
        validate(model, val_loader, max_iters=1)
truth.report(
    model,
    steps=steps,
    tokens=tokens,
    samples_per_step=B * ACCUM,
    N=truth.params(model),
    E=cfg.padded_vocab_size * cfg.n_embd,
    L=cfg.n_layer,
    d=cfg.n_embd,
    T=T,
)
