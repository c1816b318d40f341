"""One rank of a small gloo DDP language model that trains at a steady pace until STOP_FILE
(env) exists, or for SECONDS (env) at most.

Run under two torchrun node groups on one machine, it stands for a two-node job. The sleep
sets the pace, so tokens/s are steady and the two nodes step together (DDP's all-reduce).
"""

import atexit
import os
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from trainmeter import emit

SECONDS = float(os.environ.get("SECONDS_TO_TRAIN", "5"))
STOP_FILE = os.environ.get("STOP_FILE")  # the test says when it has seen enough
BATCH, SEQ, VOCAB = 4, 32, 64

torch.set_num_threads(1)
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = DistributedDataParallel(nn.Sequential(nn.Embedding(VOCAB, 16), nn.Linear(16, VOCAB)))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
gen = torch.Generator().manual_seed(rank)
flag = torch.zeros(1)
end = time.monotonic() + SECONDS
step = 0
while True:
    # every rank stops at the same step: rank 0's clock decides, the others follow
    stop = time.monotonic() >= end or bool(STOP_FILE and os.path.exists(STOP_FILE))
    flag.fill_(1.0 if stop else 0.0)
    dist.broadcast(flag, 0)
    if flag.item():
        break
    x = torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen)
    loss = nn.functional.cross_entropy(model(x).view(-1, VOCAB), x.view(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    emit(train_loss=loss.item())
    step += 1
    time.sleep(0.05 + 0.02 * rank)  # the highest rank is the slowest to come back
print(f"rank {rank} done after {step} steps", flush=True)
dist.barrier()  # both ranks tear gloo down together: one gone first can abort the other's exit
dist.destroy_process_group()
# Leave without interpreter finalization: a gloo rank can abort there (SIGABRT, "terminate
# called without an active exception", a known torch teardown race seen here under load), which
# torchrun reports as a failed job. How a rank exits is not what this test checks: the exit
# handlers run (the agent's last flush among them), then the process ends before finalization.
atexit._run_exitfuncs()
sys.stdout.flush()
os._exit(0)
