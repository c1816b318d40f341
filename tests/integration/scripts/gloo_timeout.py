"""Two gloo ranks: rank 1 stops taking part, rank 0's all_reduce times out after 3 s."""

import datetime
import os
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=3))
rank = dist.get_rank()
t = torch.ones(4)
dist.all_reduce(t)
print("RANK", rank, "first all_reduce", t.tolist(), flush=True)
if rank == 1:
    time.sleep(30)  # never joins the second one
    os._exit(0)
dist.all_reduce(t)
