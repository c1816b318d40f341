"""A data-parallel loop on gloo where one rank is slowed by a known amount per step.

    torchrun --nproc_per_node=N slow_rank.py SHAPES SLOW_RANK SLOW_MS STEPS [ALL_MS]

SHAPES, comma-separated, run one after the other in the same process group (each with its own
seeded model and data, so a shape's losses do not depend on what ran before it): `ddp`
(DistributedDataParallel), `accum` (DDP with no_sync over two micro-batches), `fsdp` (FSDP2
fully_shard), `allreduce` (gradients all-reduced by hand, an eval with a barrier after it every
10 steps). SLOW_RANK -1: no rank is slowed. The slow rank sleeps SLOW_MS in each forward (a GPU
that takes longer, as the others see it); every rank sleeps ALL_MS (default 0) in each
forward, as a GPU's compute looks from the host, so that steps are long enough to be compared.
Rank 0 prints `LOSS shape step value` (the exact float); each rank prints `COMM rank seconds`
(the time this script measured inside its own collectives, for the `allreduce` shape).
"""

from __future__ import annotations

import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn


def say(line: str) -> None:
    """One line in one write: every rank shares torchrun's stdout, and with PYTHONUNBUFFERED
    (as the tests run) print writes the text and its newline apart, so another rank's line could
    land between them ("COMM 1 0.12LOSS accum 20 ..." lost a loss line and broke a COMM line)."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


shapes, slow_rank, slow_ms, n_steps = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
all_ms = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.set_num_threads(1)


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.lin(x))


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(32, 16)
        self.blocks = nn.ModuleList([Block(), Block()])
        self.head = nn.Linear(16, 32)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if self.training:
            time.sleep((all_ms + (slow_ms if rank == slow_rank else 0.0)) / 1000.0)
        x = self.emb(ids)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def train(shape: str) -> float:
    """`n_steps` steps of one shape; returns the seconds spent inside its own collectives."""
    torch.manual_seed(0)
    net = Net()
    if shape in ("ddp", "accum"):
        from torch.nn.parallel import DistributedDataParallel as DDP

        model: nn.Module = DDP(net)
    elif shape == "fsdp":
        from torch.distributed.fsdp import fully_shard

        for block in net.blocks:
            fully_shard(block)
        model = fully_shard(net)
    else:
        model = net
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(1234 + rank)
    comm_s = 0.0

    def loss_of(ids: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(model(ids).reshape(-1, 32), ids.reshape(-1))

    for step in range(1, n_steps + 1):
        ids = torch.randint(0, 32, (4, 8), generator=g)
        if shape == "accum":
            with model.no_sync():
                (loss_of(ids[:2]) / 2).backward()
            loss = loss_of(ids[2:]) / 2
            loss.backward()
        else:
            loss = loss_of(ids)
            loss.backward()
        if shape == "allreduce":
            for p in model.parameters():
                t0 = time.perf_counter()
                dist.all_reduce(p.grad)
                comm_s += time.perf_counter() - t0
                p.grad.div_(world)
        opt.step()
        opt.zero_grad()
        if rank == 0:
            say(f"LOSS {shape} {step} {loss.item()!r}")
        if shape == "allreduce" and step % 10 == 0:  # an eval every 10 steps, then a barrier
            model.eval()
            with torch.no_grad():
                model(ids)
            model.train()
            t0 = time.perf_counter()
            dist.barrier()
            comm_s += time.perf_counter() - t0
    return comm_s


comm = sum(train(shape) for shape in shapes.split(","))
say(f"COMM {rank} {comm!r}")
dist.barrier()
dist.destroy_process_group()
# Out without the interpreter's teardown: a plain run (no tm) of this script once died there
# with "terminate called without an active exception" (SIGABRT from a gloo thread destroyed
# while joinable) after printing every line. os._exit is also a way out tm must handle (the
# agent flushes on it, agent/lifecycle.py), so the runs under tm keep proving that too.
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)
