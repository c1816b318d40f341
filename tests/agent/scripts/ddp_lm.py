"""Two-rank gloo DDP on the CPU: the smallest loop that has a real data-parallel process group."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = nn.Sequential(nn.Embedding(32, 8), nn.Linear(8, 32))
ddp = DDP(model)
opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
g = torch.Generator().manual_seed(rank)
for _ in range(3):
    ids = torch.randint(0, 32, (2, 6), generator=g)
    loss = F.cross_entropy(ddp(ids).reshape(-1, 32), ids.reshape(-1))
    loss.backward()
    opt.step()
    opt.zero_grad()
print(f"rank {rank} done", flush=True)
dist.barrier()  # both ranks tear gloo down together: one gone first can abort the other's exit
dist.destroy_process_group()
