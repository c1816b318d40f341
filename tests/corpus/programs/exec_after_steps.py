"""A job that replaces its own program mid-run (same pid), as launchers and restart wrappers do:
a first program trains 30 steps and logs 30 values, then `os.execv`s a second one (this file
again, with `--second`) that trains 20 more and logs 20 values. Both programs' steps, tokens and
values are the job's: 50 of each.

The same model class in both, so N is one number. The second program's first step is its own:
nothing of the first program's is carried across the exec but the pid and stdout.
"""

import os
import sys

import torch
import torch.nn as nn
import truth

from trainmeter import emit

torch.set_num_threads(1)
V, D, B, T = 40, 8, 4, 6
FIRST, SECOND = 30, 20
second = "--second" in sys.argv
torch.manual_seed(1 if second else 0)


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(V, D)
        self.head = nn.Linear(D, V)

    def forward(self, ids):
        return self.head(self.embed(ids))


model = TinyLM()
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
data = torch.randint(0, V, (64, T + 1))
label = "b" if second else "a"
for step in range(SECOND if second else FIRST):
    batch = data[(step * B) % 60 : (step * B) % 60 + B]
    logits = model(batch[:, :-1])
    loss = nn.functional.cross_entropy(logits.reshape(-1, V), batch[:, 1:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    emit(train_loss=loss.item())
    print(f"LOSS {label}{step} {loss.item()!r}", flush=True)
if not second:
    sys.stdout.flush()
    os.execv(sys.executable, [sys.executable, os.path.abspath(__file__), "--second"])
steps = FIRST + SECOND
truth.report(model, steps=steps, tokens=steps * B * T, values=steps, N=truth.params(model),
             E=V * D)
