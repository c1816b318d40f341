"""Samplers that run in `tm`, outside the training process: GPU (NVML), process tree, node.

The supervisor builds them once with `default_samplers(...)` and calls `.sample()` on each
every second; `.sample()` returns the record payload and never raises (a part that fails is
named in the payload's `missing`, or `unavailable` for the GPU), and `.close()` releases NVML.

Environment: TRAINMETER_FAKE_NVML=<fixture or dump> replays recorded NVML answers instead of
the driver (tests, demos on GPU-less machines); TRAINMETER_PEAKS_DIR overrides where measured
peak files are read (default ~/.cache/trainmeter/peaks).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Protocol


class Sampler(Protocol):
    kind: str

    def sample(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


def default_samplers(
    root_pid: int,
    run_dir: str | os.PathLike[str] | None,
    gpus: str | list[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> list[Sampler]:
    """Host first (its pid list feeds the GPU selection), then GPU, then node. Cheap: NVML is
    opened on the GPU sampler's first `sample()`. `run_dir` None means the current directory
    (the disk whose free space the node reports)."""
    from .gpu.families import backend_from_env
    from .gpu.sampler import GpuSampler
    from .host import HostSampler
    from .node import NodeSampler

    env = os.environ if env is None else env
    host = HostSampler(root_pid)
    gpu = GpuSampler(backend_from_env(env), gpus=gpus, env=env, tree_pids=host.tree_pids)
    node = NodeSampler(run_dir if run_dir is not None else os.getcwd(), pid=root_pid)
    return [host, gpu, node]


__all__ = ["Sampler", "default_samplers"]
