"""pytorch/examples `regression/main.py` (commit 77f55b9), run on the CPU.

Adapted from https://github.com/pytorch/examples/blob/main/regression/main.py, Copyright (c)
2017, Pytorch contributors, BSD 3-Clause License (LICENSE.pytorch-examples beside this file).
What changed: a fixed seed, at most 40 batches (the original stops when the loss is below 1e-3,
whenever that is), one thread, and the `truth` lines. The loop is the original's: no optimizer,
the weights updated by hand (`param.data.add_(-0.1 * param.grad)`).

Counted FLOPs of one step, worked out by hand (2 a multiply-add): the model `fc` is
Linear(4, 1) on a batch of 32: forward 2 x 32 x 4 = 256, backward the weight's gradient only
(the batch needs none) 256; the target of the next batch, `x.mm(W_target)`, another 256 (the
counted step runs from one forward of the model to the next, and that is where the loop makes
its next batch): 768.
"""
# ruff: noqa: UP032  (the original's code, kept as it is written there)
from itertools import count

import torch
import torch.nn.functional as F
import truth

torch.manual_seed(0)
torch.set_num_threads(1)
MAX_BATCHES = 40

POLY_DEGREE = 4
W_target = torch.randn(POLY_DEGREE, 1) * 5
b_target = torch.randn(1) * 5


def make_features(x):
    """Builds features i.e. a matrix with columns [x, x^2, x^3, x^4]."""
    x = x.unsqueeze(1)
    return torch.cat([x ** i for i in range(1, POLY_DEGREE+1)], 1)


def f(x):
    """Approximated function."""
    return x.mm(W_target) + b_target.item()


def poly_desc(W, b):
    """Creates a string description of a polynomial."""
    result = 'y = '
    for i, w in enumerate(W):
        result += '{:+.2f} x^{} '.format(w, i + 1)
    result += '{:+.2f}'.format(b[0])
    return result


def get_batch(batch_size=32):
    """Builds a batch i.e. (x, f(x)) pair."""
    random = torch.randn(batch_size)
    x = make_features(random)
    y = f(x)
    return x, y


# Define model
fc = torch.nn.Linear(W_target.size(0), 1)

for batch_idx in count(1):
    # Get data
    batch_x, batch_y = get_batch()

    # Reset gradients
    fc.zero_grad()

    # Forward pass
    output = F.smooth_l1_loss(fc(batch_x), batch_y)
    loss = output.item()

    # Backward pass
    output.backward()

    # Apply gradients
    for param in fc.parameters():
        param.data.add_(-0.1 * param.grad)

    truth.loss(batch_idx, loss)
    # Stop criterion
    if loss < 1e-3 or batch_idx >= MAX_BATCHES:
        break

print('Loss: {:.6f} after {} batches'.format(loss, batch_idx))
print('==> Learned function:\t' + poly_desc(fc.weight.view(-1), fc.bias))
print('==> Actual function:\t' + poly_desc(W_target.view(-1), b_target))
truth.report(
    fc, steps=batch_idx, samples_per_step=32, N=truth.params(fc), E=0,
    counted_flops_per_step=3 * 2 * 32 * 4,
)
