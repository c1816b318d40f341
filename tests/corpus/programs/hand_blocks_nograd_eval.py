"""Hand-written transformer blocks with no config anywhere (the shape lives only in the
modules), a tied head, and an evaluation forward each step under torch.no_grad while the model
stays in train mode: evaluation forwards are never steps nor tokens."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import truth

torch.manual_seed(0)
torch.set_num_threads(1)
V, D, L, T, B, STEPS = 56, 24, 3, 12, 3, 5


class SelfAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out = nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).reshape(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.n1, self.n2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.attn = SelfAttention(D, 3)
        self.ff = nn.Sequential(nn.Linear(D, 2 * D), nn.ReLU(), nn.Linear(2 * D, D))

    def forward(self, x):
        x = x + self.attn(self.n1(x))
        return x + self.ff(self.n2(x))


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(V, D)
        self.pos = nn.Parameter(torch.zeros(1, T, D))
        self.blocks = nn.Sequential(*[Block() for _ in range(L)])
        self.head = nn.Linear(D, V, bias=False)
        self.head.weight = self.tok.weight

    def forward(self, ids):
        return self.head(self.blocks(self.tok(ids) + self.pos[:, : ids.shape[1]]))


model = LM()
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
tokens = 0
for step in range(STEPS):
    ids = torch.randint(0, V, (B, T))
    logits = model(ids)
    tokens += ids.numel()
    loss = F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    truth.loss(step, loss)
    with torch.no_grad():  # still in train mode
        model(torch.randint(0, V, (5, T)))
truth.report(
    model, steps=STEPS, tokens=tokens, samples_per_step=B, L=L, d=D, T=T, N=truth.params(model), E=0
)
