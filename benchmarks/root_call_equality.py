"""The step probe's published totals and the models' outputs over many loop shapes, dumped so two
versions of the agent's root call can be compared byte for byte.

    .venv/bin/python benchmarks/root_call_equality.py NEW.txt
    PYTHONPATH=/tmp/old/src .venv/bin/python benchmarks/root_call_equality.py OLD.txt
    cmp NEW.txt OLD.txt

Each shape runs in this process with the probe attached afresh (`steps.attach`, as in
tests/agent/test_root_call.py): hand SGD first (no optimizer in the process yet: each backward is
the step), then one token tensor every step, a new slice each step, accumulation with keyword
calls (a mask), `no_grad` and eval forwards between steps, the same float batch twice a step and
refilled in place, forward hooks and a global pre-hook put on and taken off mid-run, LBFGS with
its closure, a GAN's two optimizers, and a root compiled in place after eager steps. Written: each
shape's totals (steps, tokens, real, real_missing, micro) and the micro-batches pending, then a
digest of every loss the loops computed (the forwards the agent called return what torch's did).
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable

import torch
from torch import nn

from trainmeter.agent.probes import steps

_digest = hashlib.sha256()


def _note(value: torch.Tensor) -> None:
    _digest.update(repr(value.detach().double().sum().item()).encode())


class LM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(32, 8)
        self.out = nn.Linear(8, 32)

    def forward(self, ids, attention_mask=None):  # noqa: ANN001, ANN201
        return self.out(self.emb(ids)).float().pow(2).mean()


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 1)

    def forward(self, x):  # noqa: ANN001, ANN201
        return self.b(torch.relu(self.a(x))).pow(2).mean()


def hand_sgd() -> None:
    m, x = MLP(), torch.randn(4, 8)
    for _ in range(10):
        loss = m(x)
        _note(loss)
        loss.backward()
        with torch.no_grad():
            for p in m.parameters():
                p.add_(p.grad, alpha=-0.01)
                p.grad = None


def lm_same() -> None:
    m = LM()
    o, ids = torch.optim.SGD(m.parameters(), lr=0.1), torch.randint(0, 32, (4, 8))
    for _ in range(12):
        loss = m(ids)
        _note(loss)
        loss.backward()
        o.step()
        o.zero_grad()


def lm_slices() -> None:
    m = LM()
    o, ids = torch.optim.SGD(m.parameters(), lr=0.1), torch.randint(0, 32, (64, 8))
    for i in range(12):
        loss = m(ids[i * 4 : (i + 1) * 4])
        _note(loss)
        loss.backward()
        o.step()
        o.zero_grad()


def lm_accumulation_eval_kwargs() -> None:
    m = LM()
    o, ids = torch.optim.AdamW(m.parameters(), lr=0.01), torch.randint(0, 32, (4, 8))
    mask = torch.ones(4, 8, dtype=torch.long)
    mask[0, 5:] = 0
    for i in range(12):
        for j in range(3):
            loss = m(ids[:, j : j + 5]) if j else m(ids, attention_mask=mask)
            _note(loss)
            loss.backward()
        o.step()
        o.zero_grad()
        with torch.no_grad():
            _note(m(ids))
        if i % 4 == 3:
            m.eval()
            _note(m(ids))
            m.train()


def mlp_twice_and_refilled() -> None:
    m, x = MLP(), torch.randn(4, 8)
    o = torch.optim.SGD(m.parameters(), lr=0.1)
    for i in range(12):
        loss = m(x) + m(x)
        _note(loss)
        loss.backward()
        o.step()
        o.zero_grad()
        if i % 3 == 0:
            with torch.no_grad():
                x.add_(0.1)


def mlp_hooks_mid_run() -> None:
    m, x = MLP(), torch.randn(4, 8)
    o = torch.optim.SGD(m.parameters(), lr=0.1)
    for i in range(14):
        if i == 5:
            hook = m.register_forward_hook(lambda mod, args, out: out * 2)
        if i == 7:
            pre = nn.modules.module.register_module_forward_pre_hook(lambda mod, args: None)
        if i == 9:
            hook.remove()
        if i == 11:
            pre.remove()
        loss = m(x)
        _note(loss)
        loss.backward()
        o.step()
        o.zero_grad()


def lbfgs() -> None:
    m, x = MLP(), torch.randn(4, 8)
    o = torch.optim.LBFGS(m.parameters(), lr=0.1, max_iter=4)

    def closure() -> torch.Tensor:
        o.zero_grad()
        loss = m(x)
        _note(loss)
        loss.backward()
        return loss

    for _ in range(6):
        o.step(closure)


def gan() -> None:
    g, d = nn.Sequential(nn.Linear(4, 8)), MLP()
    og = torch.optim.SGD(g.parameters(), lr=0.1)
    od = torch.optim.SGD(d.parameters(), lr=0.1)
    real = torch.randn(4, 8)
    for _ in range(8):
        fake = g(torch.randn(4, 4))
        loss_d = d(real) - d(fake.detach())
        _note(loss_d)
        od.zero_grad()
        loss_d.backward()
        od.step()
        loss_g = -d(fake)
        _note(loss_g)
        og.zero_grad()
        loss_g.backward()
        og.step()


def compiled_in_place() -> None:
    m, x = MLP(), torch.randn(4, 8)
    o = torch.optim.SGD(m.parameters(), lr=0.1)
    for i in range(8):
        if i == 3:
            m.compile(backend="eager")
        loss = m(x)
        _note(loss)
        loss.backward()
        o.step()
        o.zero_grad()


SHAPES: list[Callable[[], None]] = [
    hand_sgd,
    lm_same,
    lm_slices,
    lm_accumulation_eval_kwargs,
    mlp_twice_and_refilled,
    mlp_hooks_mid_run,
    lbfgs,
    gan,
    compiled_in_place,
]


def main() -> None:
    torch.manual_seed(0)
    lines = []
    for shape in SHAPES:
        steps.detach()
        steps.attach(torch)
        before = steps.totals()
        shape()
        after = steps.totals()
        moved = tuple(a - b for a, b in zip(after[:5], before[:5], strict=True))
        lines.append(f"{shape.__name__} {moved} pending {steps.pending_micro()}")
    steps.detach()
    lines.append(f"outputs {_digest.hexdigest()}")
    with open(sys.argv[1], "w") as out:
        out.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
