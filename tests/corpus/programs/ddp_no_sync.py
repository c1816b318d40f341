"""DistributedDataParallel (one process, gloo) with gradient accumulation under `no_sync()`:
the last micro-batch of each step synchronizes; a model of nn.MultiheadAttention blocks."""

import os
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn
import truth

torch.manual_seed(0)
torch.set_num_threads(1)
V, D, L, T, B, ACCUM, STEPS = 30, 16, 2, 6, 2, 2, 4


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(D, 2, batch_first=True)
        self.norm = nn.LayerNorm(D)
        self.ff = nn.Linear(D, D)

    def forward(self, x):
        x = x + self.attn(x, x, x, need_weights=False)[0]
        return x + self.ff(self.norm(x))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.layers = nn.ModuleList(Block() for _ in range(L))
        self.out = nn.Linear(D, V)

    def forward(self, ids):
        x = self.emb(ids)
        for layer in self.layers:
            x = layer(x)
        return self.out(x)


store = os.path.join(tempfile.mkdtemp(), "store")
dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
net = Net()
model = nn.parallel.DistributedDataParallel(net)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
tokens = 0
for step in range(STEPS):
    for micro in range(ACCUM):
        ids = torch.randint(0, V, (B, T))
        tokens += ids.numel()
        if micro < ACCUM - 1:
            with model.no_sync():
                loss = nn.functional.cross_entropy(model(ids).view(-1, V), ids.view(-1))
                loss.backward()
        else:
            loss = nn.functional.cross_entropy(model(ids).view(-1, V), ids.view(-1))
            loss.backward()
    opt.step()
    opt.zero_grad()
    truth.loss(step, loss)
dist.barrier()  # both ranks tear gloo down together: one gone first can abort the other's exit
dist.destroy_process_group()
truth.report(
    net,
    steps=STEPS,
    tokens=tokens,
    samples_per_step=B * ACCUM,
    L=L,
    d=D,
    T=T,
    N=truth.params(net),
    E=V * D,
)
