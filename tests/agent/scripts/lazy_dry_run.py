"""A model with lazy modules (`nn.LazyLinear`), materialized by one dry forward on a dummy batch
before the optimizer is made, as torch's LazyModuleMixin documentation recommends ("a dry run
... before constructing the optimizer"), in train mode with gradients on; then a plain loop.
The dummy is one row: not a step's data. `--floats`: an MLP on float features."""

import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_num_threads(1)
V, D, B, T, STEPS, FEAT = 32, 16, 4, 6, 5, 10
floats = "--floats" in sys.argv
if floats:
    model = nn.Sequential(nn.LazyLinear(D), nn.ReLU(), nn.LazyLinear(V))
    model(torch.zeros(1, FEAT))  # materialize the lazy weights
else:
    model = nn.Sequential(nn.Embedding(V, D), nn.LazyLinear(D), nn.ReLU(), nn.LazyLinear(V))
    model(torch.zeros(1, T, dtype=torch.long))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
tokens = 0
for _ in range(STEPS):
    if floats:
        loss = F.cross_entropy(model(torch.randn(B, FEAT)), torch.randint(0, V, (B,)))
    else:
        x = torch.randint(0, V, (B, T + 1))
        loss = F.cross_entropy(model(x[:, :-1]).flatten(0, 1), x[:, 1:].flatten())
        tokens += B * T
    opt.zero_grad()
    loss.backward()
    opt.step()
    print("LOSS", float(loss.detach()))
print(f"TRUTH steps={STEPS} tokens={tokens} samples={B}")
