"""An optimizer class of the user's own (not a torch.optim.Optimizer subclass) training a model
built from nn.TransformerEncoder (batch_first=True)."""

import torch
import torch.nn as nn
import truth

torch.manual_seed(0)
torch.set_num_threads(1)
V, D, L, T, B, STEPS = 40, 16, 3, 10, 4, 5


class SignSGD:
    def __init__(self, params, lr):
        self.params, self.lr = list(params), lr

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self):
        for p in self.params:
            if p.grad is not None:
                p.add_(p.grad.sign(), alpha=-self.lr)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        layer = nn.TransformerEncoderLayer(D, 2, 32, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, L, enable_nested_tensor=False)
        self.head = nn.Linear(D, V)

    def forward(self, ids):
        return self.head(self.encoder(self.emb(ids)))


model = Encoder()
opt = SignSGD(model.parameters(), 1e-3)
tokens = 0
for step in range(STEPS):
    ids = torch.randint(0, V, (B, T))
    opt.zero_grad()
    logits = model(ids)
    tokens += ids.numel()
    loss = nn.functional.cross_entropy(logits.view(-1, V), ids.view(-1))
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
