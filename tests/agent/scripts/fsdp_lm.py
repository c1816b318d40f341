"""Two-rank gloo sharded training on the CPU: `fsdp2` (`fully_shard`) or `fsdp1`
(FullyShardedDataParallel with `use_orig_params=True`), two steps of a tiny LM."""

from __future__ import annotations

import atexit
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

MODE = sys.argv[1]
VOCAB, WIDTH = 64, 16

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = nn.Sequential(
    nn.Embedding(VOCAB, WIDTH),
    nn.Linear(WIDTH, WIDTH),
    nn.Linear(WIDTH, WIDTH),
    nn.Linear(WIDTH, VOCAB),
)
if MODE == "fsdp2":
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (2,))
    for layer in model:
        fully_shard(layer, mesh=mesh)
    wrapped = fully_shard(model, mesh=mesh)
else:
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    wrapped = FSDP(model, use_orig_params=True, device_id=torch.device("cpu"))
opt = torch.optim.SGD(wrapped.parameters(), lr=0.1)
g = torch.Generator().manual_seed(rank)
for _ in range(2):
    ids = torch.randint(0, VOCAB, (2, 6), generator=g)
    loss = F.cross_entropy(wrapped(ids).reshape(-1, VOCAB), ids.reshape(-1))
    loss.backward()
    opt.step()
    opt.zero_grad()
print(f"rank {rank} done", flush=True)
dist.barrier()  # both ranks tear gloo down together: one gone first can abort the other's exit
dist.destroy_process_group()
# Leave without interpreter finalization: a gloo rank can abort there (SIGABRT, "terminate
# called without an active exception", a known torch teardown race seen here under load), which
# torchrun reports as a failed job. How a rank exits is not what this test checks: the exit
# handlers run (the agent's last flush among them), then the process ends before finalization.
atexit._run_exitfuncs()
sys.stdout.flush()
os._exit(0)
