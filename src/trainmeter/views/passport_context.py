"""The passport's run, hardware and software sections: what ran, on what, with which versions.

The command line keeps only the base names of paths and loses secret-looking values; the
host's name is scrubbed from the whole record by `passport.build_passport`.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from ..redact import scrub_command
from ..snapread import finite_value as _num
from .passport_entry import as_dict


def _gpus(snap: dict[str, Any]) -> tuple[int | None, str | None]:
    n = _num(snap.get("n_gpus"))
    source = as_dict(snap.get("n_gpus")).get("source")
    return (int(n) if n is not None else None), source


def hardware_section(snap: dict[str, Any]) -> dict[str, Any]:
    n_gpus, n_source = _gpus(snap)
    names: dict[str, int] = {}
    for dev in snap.get("devices") or []:
        if isinstance(dev, dict) and dev.get("name"):
            names[str(dev["name"])] = names.get(str(dev["name"]), 0) + 1
    peak = as_dict(snap.get("peak"))
    node = as_dict(snap.get("node"))
    hw: dict[str, Any] = {
        "gpus": n_gpus,
        "gpus_source": n_source,
        "gpu_models": names,
        "peak": {
            "name": peak.get("name"),
            "bf16_dense_flops_per_gpu": _num(peak.get("bf16_dense_flops")),
            "hbm_bytes_per_s": _num(peak.get("hbm_bytes_per_s")),
            "label": peak.get("label"),
            "source": peak.get("source"),
        }
        if peak
        else None,
        "cpu_cores": _num(node.get("cores")),
        "gpu_memory_b": sorted({int(m) for m in (
            _num(as_dict(g).get("memory_total_b")) for g in as_dict(snap.get("gpus")).values()
        ) if m}) or None,
    }
    return hw


def software_section(snap: dict[str, Any]) -> dict[str, Any]:
    run = as_dict(snap.get("run"))
    agent = as_dict(snap.get("agent"))
    sw: dict[str, Any] = {"trainmeter": run.get("tm_version")}
    sw["python"] = agent.get("python") or run.get("python")
    for name, version in sorted(as_dict(agent.get("versions")).items()):
        sw[str(name)] = version
    gv = as_dict(snap.get("gpu_versions"))
    if gv.get("driver"):
        sw["nvidia_driver"] = gv["driver"]
    if gv.get("cuda"):
        sw["cuda_driver_api"] = gv["cuda"]
    return {k: v for k, v in sw.items() if v is not None}


def _status(run: dict[str, Any], time_part: dict[str, Any]) -> str:
    if run.get("signal"):
        return f"signal {run['signal']}"
    status = run.get("exit_status")
    if isinstance(status, int):
        return "ok" if status == 0 else f"exit {status}"
    return "finished" if time_part.get("finished") else "no end recorded"


def run_section(snap: dict[str, Any]) -> dict[str, Any]:
    run = as_dict(snap.get("run"))
    time_part = as_dict(snap.get("time"))
    start = _num(run.get("unix_time"))
    out: dict[str, Any] = {
        "name": run.get("name"),
        "command": scrub_command(run.get("argv")),
        "status": as_dict(snap.get("death")).get("text") or _status(run, time_part),
        "exit_status": run.get("exit_status"),
        "start_utc": None,
        "end_utc": None,
    }
    wall = _num(time_part.get("elapsed_s")) or _num(run.get("elapsed_s"))
    if start is not None:
        out["start_utc"] = _iso(start)
        if wall is not None:
            out["end_utc"] = _iso(start + wall)
    return out


def _iso(unix: float) -> str:
    return datetime.fromtimestamp(unix, timezone.utc).isoformat(timespec="seconds")
