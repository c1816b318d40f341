"""The node sampler on this machine, and the cgroup limits from synthetic v1/v2 trees."""

from __future__ import annotations

import os
import time

import psutil
import pytest

from trainmeter.sources import cgroup
from trainmeter.sources.files import DumpFiles
from trainmeter.sources.node import NodeSampler, _cpu_split


def test_node_sample_on_this_machine_is_sane(tmp_path):
    node = NodeSampler(tmp_path)
    sum(i * i for i in range(200_000))  # let some CPU time pass
    first = node.sample()
    second = node.sample()
    for d in (first, second):
        split = d["cpu"]
        assert set(split) == {"user", "system", "iowait", "steal", "idle"}
        assert all(0.0 <= v <= 1.0 for v in split.values())
        assert sum(split.values()) == pytest.approx(1.0, abs=0.02)
    assert second["cores"] == os.cpu_count()
    assert len(second["load"]) == 3
    mem = second["memory"]
    assert mem["total_b"] == psutil.virtual_memory().total
    assert 0 < mem["available_b"] <= mem["total_b"]
    assert second["disk"]["path"] == str(tmp_path)
    assert 0 < second["disk"]["free_b"] <= second["disk"]["total_b"]
    assert second["disk_io"]["read_b"] >= first["disk_io"]["read_b"] >= 0
    assert second["net"]["rx_b"] >= first["net"]["rx_b"] >= 0
    # limits are either below the host, or absent with the reason
    assert "limits" in second or second["missing"]["limits"]


def test_node_sample_has_each_cores_busy_share(tmp_path):
    """One busy share per logical core; their mean is the machine's busy share (same interval)."""
    node = NodeSampler(tmp_path)
    end = time.monotonic() + 0.3
    while time.monotonic() < end:  # one core busy for a while
        pass
    d = node.sample()
    cores = d["cpu_per_core"]
    assert len(cores) == psutil.cpu_count(logical=True)
    assert all(0.0 <= c <= 1.0 for c in cores)
    busy = 1 - d["cpu"]["idle"] - d["cpu"]["iowait"]
    assert sum(cores) / len(cores) == pytest.approx(busy, abs=0.1)
    assert max(cores) > 0.0


def test_cpu_split_by_hand():
    from collections import namedtuple

    T = namedtuple("T", "user nice system idle iowait irq softirq steal guest guest_nice")
    a = T(100, 0, 50, 800, 10, 0, 0, 0, 0, 0)
    # +30 user +10 nice +15 system +5 irq +35 idle +3 iowait +2 steal = 100 ticks
    b = T(130, 10, 65, 835, 13, 5, 0, 2, 7, 0)  # guest 7 is inside user: not counted twice
    split = _cpu_split(a, b)
    assert split == pytest.approx(
        {"user": 0.40, "system": 0.20, "iowait": 0.03, "steal": 0.02, "idle": 0.35}
    )


V2 = {
    "files": {
        "/proc/self/cgroup": "0::/kubepods/pod1/ctr\n",
        "/sys/fs/cgroup/cgroup.controllers": "cpu memory io\n",
        "/sys/fs/cgroup/kubepods/pod1/ctr/memory.max": "max\n",
        "/sys/fs/cgroup/kubepods/pod1/ctr/cpu.max": "250000 100000\n",
        "/sys/fs/cgroup/kubepods/pod1/memory.max": "8589934592\n",
        "/sys/fs/cgroup/kubepods/pod1/cpu.max": "max 100000\n",
    }
}


def test_cgroup_v2_tightest_ancestor_and_only_below_host():
    files = DumpFiles(V2)
    lim, why = cgroup.limits(files, host_memory_b=64 * 2**30, host_cores=16)
    # memory from the pod (8 GiB), CPU from the container: 250000/100000 = 2.5 cores
    assert lim["memory_b"] == 8 * 2**30 and lim["cpu_cores"] == 2.5
    assert lim["source"].startswith("cgroup v2: ") and "pod1/memory.max" in lim["source"]
    # on a 2-core host a 2.5-core quota is no limit at all; memory still is
    lim, _ = cgroup.limits(files, host_memory_b=64 * 2**30, host_cores=2)
    assert "cpu_cores" not in lim and lim["memory_b"] == 8 * 2**30
    lim, why = cgroup.limits(files, host_memory_b=4 * 2**30, host_cores=2)
    assert lim is None and "not below the host" in why


def test_cgroup_v1_reads_the_mount_root_inside_a_namespace():
    files = DumpFiles(
        {
            "files": {
                "/proc/self/cgroup": "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n",
                # inside the container the group's own files sit at the mount root
                "/sys/fs/cgroup/memory/memory.limit_in_bytes": "4294967296\n",
                "/sys/fs/cgroup/cpu/cpu.cfs_quota_us": "150000\n",
                "/sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n",
            },
            "dirs": {
                "/sys/fs/cgroup/memory": ["memory.limit_in_bytes"],
                "/sys/fs/cgroup/cpu": ["cpu.cfs_quota_us"],
            },
        }
    )
    lim, _ = cgroup.limits(files, host_memory_b=32 * 2**30, host_cores=8)
    assert lim == {
        "memory_b": 4 * 2**30,
        "cpu_cores": 1.5,
        "source": "cgroup v1: /sys/fs/cgroup/memory/memory.limit_in_bytes, "
        "/sys/fs/cgroup/cpu/cpu.cfs_quota_us",
    }


def test_cgroup_v1_unlimited_says_so():
    files = DumpFiles(
        {
            "files": {
                "/proc/self/cgroup": "4:memory:/x\n",
                "/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
            },
            "dirs": {"/sys/fs/cgroup/memory": []},
        }
    )
    lim, why = cgroup.limits(files, 2**34, 4)
    assert lim is None and why == "the cgroup (v1) sets no memory or CPU limit"


def test_no_proc_cgroup_is_a_reason_not_an_error():
    lim, why = cgroup.limits(DumpFiles({}), 2**34, 4)
    assert lim is None and "unreadable" in why


def test_node_sampler_uses_the_given_files_for_limits(tmp_path):
    d = NodeSampler(tmp_path, files=_with_disk(V2, tmp_path)).sample()
    if d["memory"]["total_b"] > 8 * 2**30:
        assert d["limits"]["memory_b"] == 8 * 2**30
    else:
        assert "limits" not in d or "memory_b" not in d["limits"]


def _with_disk(record, path):
    rec = {**record, "disk_usage": {str(path): {"total_b": 100, "free_b": 40}}}
    return DumpFiles(rec)
