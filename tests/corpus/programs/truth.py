"""What each corpus program knows about itself, printed for the test to compare with `tm`.

Written by the programs, never read from trainmeter: each counts its own optimizer updates,
the token ids it fed the model in training forwards, and states the shape it built. `LOSS`
lines carry the exact float (repr) so a run with and without `tm` can be compared bit for bit.
"""

import io
import json

import torch


def loss(step, value):
    value = value.detach() if isinstance(value, torch.Tensor) else value
    print(f"LOSS {step} {float(value)!r}", flush=True)


def params(model):
    """N: every parameter once (`parameters()` yields a tied weight once)."""
    return sum(p.numel() for p in model.parameters())


def saved(model):
    """torch.save of the whole module works (nothing of tm's is reachable from it)."""
    buf = io.BytesIO()
    torch.save(model, buf)
    return buf.tell() > 0


def report(model, **truth):
    truth["saved"] = saved(model)
    print("TRUTH " + json.dumps(truth), flush=True)
