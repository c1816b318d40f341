"""Sharded layouts that need more ranks than a CPU test has, built for real by torch in one
process on its "fake" process group (collectives do nothing; shapes, meshes and groups are
torch's own), then read by the model probe. Prints one JSON line: case -> [N, E, dp]."""

from __future__ import annotations

import json

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import (
    DataParallelMeshDims,
    FullyShardedDataParallel,
    ShardingStrategy,
    fully_shard,
)
from torch.distributed.tensor import Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from torch.testing._internal.distributed.fake_pg import FakeStore

from trainmeter.agent.probes import model as probe

probe._torch = torch
dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=8)


def lm() -> nn.Module:
    # N = 64*16 + (16*32 + 32) + (32*16 + 16) + (16*64 + 64) = 1024 + 544 + 528 + 1088 = 3184
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Embedding(64, 16), nn.Linear(16, 32), nn.Linear(32, 16), nn.Linear(16, 64)
    )


def read(root: nn.Module) -> list:
    n, e, _ = probe.count_params(root)
    dp = probe.data_parallel_degree(probe.unwrap_chain(root), root)
    return [n, e, dp[0] if dp else None]


out = {}
# HSDP with fully_shard: 2 replicas x 4 shards
hsdp = lm()
fully_shard(hsdp, mesh=init_device_mesh("cpu", (2, 4), mesh_dim_names=("replicate", "shard")))
out["fsdp2_hsdp"] = read(hsdp)

# data x tensor parallel: 2 x 4, the TorchTitan way (TP on mesh["tp"], FSDP on mesh["dp"])
mesh = init_device_mesh("cpu", (2, 4), mesh_dim_names=("dp", "tp"))
tp = lm()
parallelize_module(tp, mesh["tp"], {"1": ColwiseParallel(), "2": RowwiseParallel()})
fully_shard(tp, mesh=mesh["dp"])
out["fsdp2_dp_x_tp"] = read(tp)

# the same 2 x 4 mesh given whole to fully_shard, its data dimension named (dp_mesh_dims):
# every parameter a DTensor on the full mesh, sharded over "tp"
spmd = lm()
for layer in spmd:
    for name, param in list(layer.named_parameters(recurse=False)):
        full = distribute_tensor(param.detach(), mesh, [Replicate(), Shard(0)])
        setattr(layer, name, nn.Parameter(full))
fully_shard(spmd, mesh=mesh, dp_mesh_dims=DataParallelMeshDims(shard="dp"))
out["fsdp2_named_dp_x_tp"] = read(spmd)

# FSDP1 hybrid sharding on the same 2 x 4 mesh: shard in groups of 4, replicate across 2
hybrid = FullyShardedDataParallel(
    lm(),
    device_mesh=init_device_mesh("cpu", (2, 4)),
    sharding_strategy=ShardingStrategy.HYBRID_SHARD,
    use_orig_params=True,
    device_id=torch.device("cpu"),
)
out["fsdp1_hybrid"] = read(hybrid)

# FSDP1 without use_orig_params, the output head tied to the embedding:
# N = 64*16 + (16*16 + 16) = 1296 (the tied head once), E = 0 (the table is also a matmul)
torch.manual_seed(0)
tied = nn.Sequential(nn.Embedding(64, 16), nn.Linear(16, 16), nn.Linear(16, 64, bias=False))
tied[2].weight = tied[0].weight
out["fsdp1_flat_tied"] = read(FullyShardedDataParallel(tied, device_id=torch.device("cpu")))
print(json.dumps(out))
