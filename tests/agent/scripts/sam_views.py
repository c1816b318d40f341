"""Sharpness-aware minimization in the shape of davda54/sam (written here, not copied): a
`torch.optim.Optimizer` subclass around a base SGD, each step two forward/backward passes of one
batch, `first_step` perturbing the weights and `second_step` restoring them and stepping the base.
The loop slices inputs and targets out of one token tensor at each forward (`x[:, :-1]`), as LM
loops do: the second pass feeds a new view of the same data, one batch. `--floats`: a regression
MLP fed `x[:, :F]` of one float tensor the same way."""

import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_num_threads(1)
V, D, B, T, STEPS, FEAT = 32, 16, 3, 6, 4, 5
floats = "--floats" in sys.argv


class SAM(torch.optim.Optimizer):
    def __init__(self, params, base, rho=0.05, **kw):
        super().__init__(params, dict(rho=rho, **kw))
        self.base_optimizer = base(self.param_groups, **kw)
        self.param_groups = self.base_optimizer.param_groups

    @torch.no_grad()
    def first_step(self):
        grads = [p.grad.norm(2) for g in self.param_groups for p in g["params"] if p.grad is not None]
        norm = torch.norm(torch.stack(grads), 2)
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    self.state[p]["e_w"] = e_w = p.grad * (group["rho"] / (norm + 1e-12))
                    p.add_(e_w)
        self.zero_grad()

    @torch.no_grad()
    def second_step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.sub_(self.state[p]["e_w"])
        self.base_optimizer.step()
        self.zero_grad()


if floats:
    model = nn.Sequential(nn.Linear(FEAT, D), nn.Tanh(), nn.Linear(D, 1))
else:
    model = nn.Sequential(nn.Embedding(V, D), nn.Linear(D, V))
opt = SAM(model.parameters(), torch.optim.SGD, lr=0.1, momentum=0.9)


def loss_of(x):
    if floats:
        return F.mse_loss(model(x[:, :FEAT]), x[:, FEAT:])
    return F.cross_entropy(model(x[:, :-1]).flatten(0, 1), x[:, 1:].flatten())


tokens = 0
for _ in range(STEPS):
    x = torch.randn(B, FEAT + 1) if floats else torch.randint(0, V, (B, T + 1))
    loss = loss_of(x)
    loss.backward()
    opt.first_step()
    loss_of(x).backward()
    opt.second_step()
    tokens += 0 if floats else B * T
    print("LOSS", float(loss.detach()))
print(f"TRUTH steps={STEPS} tokens={tokens} samples={B}")
