"""A two-stage pipeline on two gloo ranks (CPU): rank 0 embeds, rank 1 computes the loss, so
the loss exists on rank 1 only and only rank 1 emits it (as in a pipeline-parallel job)."""

import os

import torch
import torch.distributed as dist
from torch import nn

from trainmeter import emit

STEPS, BATCH, SEQ, VOCAB, WIDTH = int(os.environ.get("STEPS", "12")), 4, 16, 32, 16

torch.set_num_threads(1)
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(rank)
stage = nn.Embedding(VOCAB, WIDTH) if rank == 0 else nn.Linear(WIDTH, VOCAB)
opt = torch.optim.SGD(stage.parameters(), lr=0.1)
gen = torch.Generator().manual_seed(0)  # both ranks draw the same batches
for _ in range(STEPS):
    x = torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen)
    opt.zero_grad()
    if rank == 0:
        act = stage(x)
        dist.send(act.detach(), 1)
        grad = torch.empty_like(act)
        dist.recv(grad, 1)
        act.backward(grad)
    else:
        act = torch.empty(BATCH, SEQ, WIDTH)
        dist.recv(act, 0)
        act.requires_grad_()
        loss = nn.functional.cross_entropy(stage(act).view(-1, VOCAB), x.view(-1))
        loss.backward()
        dist.send(act.grad, 0)
    opt.step()
    if rank == 1:
        emit(train_loss=loss.item())
        print(f"LOSS {loss.item().hex()}", flush=True)
dist.barrier()
dist.destroy_process_group()
