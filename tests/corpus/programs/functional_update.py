"""A functional optimizer: parameters held in a dict, the model called through
`torch.func.functional_call`, gradients from `torch.autograd.grad`, a new dict each step. No
optimizer object and no `.backward()`."""

import torch
import torch.nn as nn
import truth
from torch.func import functional_call

torch.manual_seed(0)
torch.set_num_threads(1)
B, STEPS, LR = 8, 5, 0.1

model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 1))
params = {k: v.detach().clone().requires_grad_() for k, v in model.named_parameters()}
for step in range(STEPS):
    x, y = torch.randn(B, 6), torch.randn(B, 1)
    loss = ((functional_call(model, params, (x,)) - y) ** 2).mean()
    grads = torch.autograd.grad(loss, list(params.values()))
    params = {
        k: (v - LR * g).detach().requires_grad_()
        for (k, v), g in zip(params.items(), grads, strict=True)
    }
    truth.loss(step, loss)
truth.report(model, steps=STEPS, samples_per_step=B, N=truth.params(model), E=0)
