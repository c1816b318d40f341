"""N fast optimizer steps, each emitting its loss, then the process dies as argv[2] says:
a signal it sends itself (TERM, HUP, INT, KILL) or `os._exit`. Prints each step's loss first."""

import os
import signal
import sys

import torch

from trainmeter import emit

steps, how = int(sys.argv[1]), sys.argv[2]
torch.manual_seed(0)
model = torch.nn.Embedding(16, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
ids = torch.randint(0, 16, (2, 8))
for _ in range(steps):
    loss = model(ids).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    emit(loss=loss.item())
print("DONE", steps, flush=True)
if how == "exit":
    os._exit(3)
os.kill(os.getpid(), getattr(signal, "SIG" + how))
signal.pause()  # a handled signal (INT raises KeyboardInterrupt at once) never gets here
