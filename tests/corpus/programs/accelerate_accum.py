"""Hugging Face Accelerate on the CPU: `accelerator.accumulate(model)` with
gradient_accumulation_steps=2, `accelerator.backward`, the wrapped optimizer stepping only on
the synchronizing micro-batch."""

import torch
import torch.nn as nn
import truth
from accelerate import Accelerator

torch.manual_seed(0)
torch.set_num_threads(1)
V, D, L, T, B, ACCUM, BATCHES = 20, 16, 2, 5, 2, 2, 8


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        layer = nn.TransformerEncoderLayer(D, 2, 32, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, L, enable_nested_tensor=False)
        self.cls = nn.Linear(D, 3)

    def forward(self, ids):
        return self.cls(self.enc(self.emb(ids)))


accelerator = Accelerator(cpu=True, gradient_accumulation_steps=ACCUM)
data = [(torch.randint(0, V, (B, T)), torch.randint(0, 3, (B, T))) for _ in range(BATCHES)]
net = Tagger()
model, opt = accelerator.prepare(net, torch.optim.Adam(net.parameters(), lr=1e-3))
tokens = updates = 0
for i, (ids, tags) in enumerate(data):
    with accelerator.accumulate(model):
        loss = nn.functional.cross_entropy(model(ids).reshape(-1, 3), tags.reshape(-1))
        tokens += ids.numel()
        accelerator.backward(loss)
        opt.step()
        opt.zero_grad()
        if accelerator.sync_gradients:
            updates += 1
    truth.loss(i, loss)
truth.report(
    net,
    steps=updates,
    tokens=tokens,
    samples_per_step=B * ACCUM,
    L=L,
    d=D,
    T=T,
    N=truth.params(net),
    E=V * D,
)
