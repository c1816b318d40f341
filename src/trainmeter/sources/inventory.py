"""What `tm hardware` and `tm doctor` show about the node, and the `--dump` that packs it.

Everything here is read through a `Files` and a GPU `Backend`, so a dump (the recorded answers of
both) rebuilds the same inventory on another machine: a user's report becomes a test fixture.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..hardware.measured_peaks import peaks_dir
from ..records import ENV_PEAKS_DIR
from . import cgroup
from .files import DumpFiles, Files, RecordingFiles
from .gpu.backend import Backend
from .gpu.dcgm import DCGM_PROCESS_NAMES, live_process_names
from .gpu.fake import FakeBackend
from .gpu.families import backend_from_env
from .gpu.record import RecordingBackend
from .gpu.sampler import GpuSampler

DUMP_FORMAT = "trainmeter-dump/1"
PSEUDO_FS = frozenset(
    "proc sysfs cgroup cgroup2 devpts mqueue tmpfs devtmpfs securityfs pstore debugfs tracefs "
    "bpf configfs fusectl hugetlbfs autofs binfmt_misc nsfs rpc_pipefs ramfs squashfs efivarfs "
    "selinuxfs overlay_none nfsd fuse.gvfsd-fuse fuse.portal".split()
)


def spec_for(name: str) -> tuple[Any | None, str]:
    """The datasheet spec of a card by its exact NVML name, or None and why."""
    try:
        from trainmeter.hardware.specs import lookup
    except ImportError:
        return None, "the spec table (trainmeter.hardware.specs) is not in this build"
    try:
        spec = lookup(name)
    except Exception as exc:  # noqa: BLE001 - a broken table costs the spec, not the command
        return None, f"spec lookup failed: {type(exc).__name__}: {exc}"
    if spec is None:
        return (
            None,
            f"no cited dense peak for {name!r} in trainmeter's table: no MFU on it "
            "unless measured (python -m trainmeter.hardware.measure_peak) or declared (--peak-tflops)",
        )
    return spec, ""


def _spec_dict(spec: Any) -> dict[str, Any]:
    out = {}
    for key in ("bf16_dense_flops", "tensor_clock_mhz", "hbm_bytes_per_s", "gpm", "sources"):
        value = getattr(spec, key, None)
        if value is not None:
            out[key] = value
    return out


def _cpu(files: Files) -> dict[str, Any]:
    text = files.read("/proc/cpuinfo") or ""
    model = None
    logical = 0
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "processor":
            logical += 1
        elif key == "model name" and model is None:
            model = value.strip()
    out: dict[str, Any] = {}
    if model:
        out["model"] = model
    if logical:
        out["cores"] = logical
    return out


def _meminfo(files: Files) -> dict[str, int]:
    text = files.read("/proc/meminfo") or ""
    wanted = {"MemTotal": "total_b", "MemAvailable": "available_b", "SwapTotal": "swap_total_b"}
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in wanted:
            parts = value.split()
            if parts and parts[0].isdigit():
                out[wanted[key]] = int(parts[0]) * 1024
    return out


def _disks(files: Files) -> list[dict[str, Any]]:
    text = files.read("/proc/mounts") or ""
    out = []
    seen = set()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 3 or parts[2] in PSEUDO_FS or parts[1] in seen:
            continue
        if parts[1].startswith(("/proc", "/sys", "/dev/")) and parts[1] != "/dev/shm":
            continue
        seen.add(parts[1])
        usage = files.disk_usage(parts[1])
        row = {"mount": parts[1], "device": parts[0], "fs": parts[2]}
        if usage:
            row.update(usage)
        out.append(row)
    return out


def _network(files: Files) -> list[dict[str, Any]]:
    out = []
    for nic in files.listdir("/sys/class/net") or []:
        if nic == "lo":
            continue
        row: dict[str, Any] = {"name": nic}
        state = files.read(f"/sys/class/net/{nic}/operstate")
        if state:
            row["state"] = state.strip()
        speed = (files.read(f"/sys/class/net/{nic}/speed") or "").strip()
        if speed.lstrip("-").isdigit() and int(speed) > 0:
            row["speed_mb_s"] = int(speed)
        out.append(row)
    return out


def gpu_inventory(
    backend: Backend,
    env: Mapping[str, str],
    hostname: str,
    files: Files | None = None,
    process_names: Callable[[], Iterable[str]] | None = None,
) -> dict[str, Any]:
    files = files or Files()
    sampler = GpuSampler(
        backend=backend,
        env={ENV_PEAKS_DIR: str(peaks_dir(env))},
        hostname=hostname,
        read_text=files.read,
        process_names=process_names,
    )
    try:
        d = sampler.sample()
    finally:
        sampler.close()
    if "unavailable" in d:
        return {"unavailable": d["unavailable"]}
    rows = []
    for row in d["gpus"]:
        keep = {
            k: row[k]
            for k in (
                "index",
                "name",
                "uuid",
                "memory_total_b",
                "max_sm_clock_mhz",
                "power_limit_w",
                "measured_peak_flops",
                "measured_peak_source",
                "lost",
            )
            if k in row
        }
        spec, why = spec_for(row.get("name", ""))
        if spec is not None:
            keep["spec"] = _spec_dict(spec)
        else:
            keep["spec_missing"] = why
        gpm_reason = (row.get("missing") or {}).get("sm_active", "")
        keep["gpm"] = "GPM needs two samples" in gpm_reason or not gpm_reason
        if not keep["gpm"]:
            keep["gpm_missing"] = gpm_reason
        rows.append(keep)
    out: dict[str, Any] = {"gpus": rows, "versions": d.get("versions", {})}
    if d.get("gpm_unavailable"):
        out["gpm_unavailable"] = d["gpm_unavailable"]
    return out


def inventory(
    files: Files | None = None,
    backend: Backend | None = None,
    env: Mapping[str, str] | None = None,
    hostname: str | None = None,
    pid: int | str = "self",
    process_names: Callable[[], Iterable[str]] | None = None,
) -> dict[str, Any]:
    """The node as `tm hardware --json` shows it. `process_names` (for DCGM detection)
    defaults to the live process list."""
    env = os.environ if env is None else env
    files = files or Files()
    backend = backend or backend_from_env(env)
    hostname = hostname or socket.gethostname()
    mem = _meminfo(files)
    cpu = _cpu(files)
    rep = cgroup.read_cgroup(files, pid)
    limits, why = cgroup.limits(files, mem.get("total_b"), cpu.get("cores"), pid)
    container: dict[str, Any] = {"cgroup": rep.version}
    if limits:
        container["limits"] = limits
    else:
        container["limits_missing"] = why
    return {
        "hostname": hostname,
        "cpu": cpu,
        "memory": mem,
        "disks": _disks(files),
        "network": _network(files),
        "container": container,
        **gpu_inventory(backend, env, hostname, files, process_names),
    }


def make_dump(
    env: Mapping[str, str] | None = None, backend: Backend | None = None, files: Files | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(inventory, dump): the inventory read through recorders, and what they recorded."""
    env = os.environ if env is None else env
    rec_files = RecordingFiles(files)
    rec_backend = RecordingBackend(
        backend or backend_from_env(env), note="tm hardware --dump on " + socket.gethostname()
    )
    hostname = socket.gethostname()
    dcgm = sorted(set(live_process_names()) & DCGM_PROCESS_NAMES)
    inv = inventory(rec_files, rec_backend, env, hostname, process_names=lambda: dcgm)
    dump = {
        "format": DUMP_FORMAT,
        "hostname": hostname,
        "created_unix": time.time(),
        "peaks_dir": str(peaks_dir(env)),
        "dcgm_processes": dcgm,
        "nvml": rec_backend.fixture,
        "node": rec_files.record,
    }
    return inv, dump


def inventory_from_dump(
    dump: dict[str, Any], env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Rebuild the inventory a dump was made from, on any machine."""
    if dump.get("format") != DUMP_FORMAT:
        raise ValueError(f"not a {DUMP_FORMAT} file")
    env = {ENV_PEAKS_DIR: dump.get("peaks_dir", "/nonexistent")}
    dcgm = list(dump.get("dcgm_processes") or [])
    return inventory(
        DumpFiles(dump["node"]),
        FakeBackend(dump["nvml"]),
        env,
        dump["hostname"],
        process_names=lambda: dcgm,
    )
