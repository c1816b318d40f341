"""Sequence-first, as fairseq-era code and the PyTorch tutorials write it: token ids (T, B),
nn.TransformerEncoder with the default batch_first=False, so every activation is (T, B, D)."""

import torch
import torch.nn as nn
import truth

torch.manual_seed(0)
torch.set_num_threads(1)
V, D, L, T, B, STEPS = 33, 16, 2, 9, 4, 5


class TransformerModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(V, D)
        layer = nn.TransformerEncoderLayer(D, 4, 32, dropout=0.1)
        self.transformer_encoder = nn.TransformerEncoder(layer, L, enable_nested_tensor=False)
        self.linear = nn.Linear(D, V)

    def forward(self, src, src_mask):
        return self.linear(self.transformer_encoder(self.embedding(src), src_mask))


model = TransformerModel()
opt = torch.optim.SGD(model.parameters(), lr=0.5)
mask = nn.Transformer.generate_square_subsequent_mask(T)
tokens = 0
for step in range(STEPS):
    data = torch.randint(0, V, (T + 1, B))
    src, target = data[:-1], data[1:]
    out = model(src, mask)
    tokens += src.numel()
    loss = nn.functional.cross_entropy(out.view(-1, V), target.reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    truth.loss(step, loss)
truth.report(
    model,
    steps=STEPS,
    tokens=tokens,
    samples_per_step=B,
    L=L,
    d=D,
    T=T,
    N=truth.params(model),
    E=V * D,
)
