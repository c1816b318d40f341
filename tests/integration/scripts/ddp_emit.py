"""Two gloo ranks of DDP on the CPU; every rank emits its loss, as many loops do."""

import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from trainmeter import emit

STEPS, BATCH, SEQ = 8, 4, 16

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = DistributedDataParallel(nn.Sequential(nn.Embedding(32, 16), nn.Linear(16, 32)))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
gen = torch.Generator().manual_seed(rank)
for _ in range(STEPS):
    x = torch.randint(0, 32, (BATCH, SEQ), generator=gen)
    loss = nn.functional.cross_entropy(model(x).view(-1, 32), x.view(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    emit(train_loss=loss.item())
    time.sleep(0.1 * (1 + rank))  # rank 1 is the straggler: its own step records, slower
print(f"rank {rank} done, world {os.environ['WORLD_SIZE']}")
dist.barrier()  # both ranks tear gloo down together: one gone first can abort the other's exit
dist.destroy_process_group()
