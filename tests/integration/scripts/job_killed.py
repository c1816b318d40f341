"""A torchrun job killed as a whole, or a rank killed before its first step (argv[1]).

whole  two DDP ranks on gloo make argv[2] steps; right after its last optimizer step rank 0
       SIGKILLs rank 1, torchrun and itself, as a cgroup kill or a scheduler ends a whole job:
       no process gets to flush, so the last steps are only in the agents' rings.
first  no process group: rank 1 steps until torchrun stops it; rank 0 waits until rank 1 made
       argv[2] steps, then SIGKILLs itself before its own first step (the rank an OOM killer
       picked), and torchrun SIGTERMs rank 1.

Each rank writes `STEP <rank> <n>` after its n-th optimizer step, the truth the log is held to.
"""

import os
import signal
import sys
import time
from pathlib import Path

import torch

how, steps = sys.argv[1], int(sys.argv[2])
rank = int(os.environ["RANK"])
torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
x = torch.randn(4, 8)
flag = Path(f"rank1-made-{steps}")

if how == "whole":
    import torch.distributed as dist

    dist.init_process_group("gloo")
    pids = [0, 0]
    dist.all_gather_object(pids, os.getpid())
    model = torch.nn.parallel.DistributedDataParallel(model)
elif rank == 0:
    while not flag.exists():
        time.sleep(0.01)
    os.kill(os.getpid(), signal.SIGKILL)

opt = torch.optim.SGD(model.parameters(), lr=0.1)
n = 0
while how == "first" or n < steps:
    opt.zero_grad()
    model(x).pow(2).mean().backward()
    opt.step()
    n += 1
    os.write(1, f"STEP {rank} {n}\n".encode())  # one write: the ranks' lines never interleave
    if how == "whole" and rank == 0 and n == steps:
        for pid in (pids[1], os.getppid(), os.getpid()):
            os.kill(pid, signal.SIGKILL)
    if how == "first" and n == steps:
        flag.touch()
time.sleep(60)  # never reached in a run that goes as planned
