"""LBFGS with a closure: each `optimizer.step(closure)` runs forward and backward several times
(max_iter) on the same batch, and is one step: one batch of data a step, however many times
the closure evaluates it."""

import torch
import torch.nn as nn
import truth

torch.manual_seed(0)
torch.set_num_threads(1)
B, STEPS = 32, 4

model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=4)
x = torch.randn(B, 3)
y = x.sum(dim=1, keepdim=True) ** 2
for step in range(STEPS):

    def closure():
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        return loss

    loss = opt.step(closure)
    truth.loss(step, loss)
truth.report(model, steps=STEPS, N=truth.params(model), E=0, samples_per_step=B)
