"""`tm doctor [--json] [--python PATH]`: what trainmeter can see here, and why anything is missing.

One line a check: NVML and the driver, each GPU's datasheet spec, GPM, a measured peak, DCGM,
the cgroup's limits, psutil, and whether the in-process agent can load: its bootstrap, and why
this interpreter (or `--python PATH`) would run without it, via `trainmeter.supervisor.python_check`.
A check that cannot pass says why and what would enable it; `tm doctor` itself always exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from ..readable import si_unit
from ..records import ENV_DISABLE

OK, NO, INFO = "ok", "no", "--"


def _check(name: str, status: str, detail: str) -> dict[str, str]:
    return {"check": name, "status": status, "detail": detail}


def _psutil() -> dict[str, str]:
    try:
        import psutil
    except ImportError:
        return _check(
            "psutil", NO, "not installed: no process tree or node samples (pip install psutil)"
        )
    return _check("psutil", OK, f"psutil {psutil.__version__}: process tree and node samples")


def _gpus(env: dict[str, str]) -> list[dict[str, str]]:
    from trainmeter.sources.gpu.dcgm import dcgm_reason
    from trainmeter.sources.inventory import backend_from_env, gpu_inventory, spec_for

    out = []
    try:
        import pynvml  # noqa: F401
    except ImportError:
        out.append(_check("nvml", NO, "nvidia-ml-py is not installed (pip install nvidia-ml-py)"))
        return out
    inv = gpu_inventory(backend_from_env(env), env, hostname=os.uname().nodename)
    if "unavailable" in inv:
        out.append(_check("nvml", NO, f"{inv['unavailable']}: no GPU rows, no energy, no OFU"))
        out.append(
            _check("gpm", NO, "needs NVML (and a Hopper or newer GPU): no SM/tensor active, no OFU")
        )
        dcgm = dcgm_reason()
        if dcgm:
            out.append(_check("dcgm", INFO, dcgm))
        return out
    v = inv.get("versions", {})
    out.append(
        _check(
            "nvml",
            OK,
            f"driver {v.get('driver', '?')}, NVML {v.get('nvml', '?')}, "
            f"CUDA {v.get('cuda', '?')}; {len(inv['gpus'])} GPU(s)",
        )
    )
    dcgm = dcgm_reason()
    out.append(
        _check(
            "dcgm",
            INFO if dcgm else OK,
            dcgm or "no DCGM process on this node: trainmeter may arm GPM",
        )
    )
    for gpu in inv["gpus"]:
        label = f"gpu{gpu['index']}"
        name = gpu.get("name") or "?"
        spec, why = spec_for(name)
        if spec is not None:
            peak = getattr(spec, "bf16_dense_flops", None)
            out.append(
                _check(
                    f"{label} spec",
                    OK,
                    f"{name}: dense BF16 peak {si_unit(peak, 'FLOP/s')} (cited)"
                    if peak
                    else f"{name}: in table",
                )
            )
        else:
            out.append(_check(f"{label} spec", NO, why))
        if gpu.get("gpm"):
            out.append(_check(f"{label} gpm", OK, "GPM: SM, tensor and DRAM active; OFU"))
        else:
            out.append(
                _check(
                    f"{label} gpm",
                    NO,
                    f"{gpu.get('gpm_missing', '?')}: no SM/tensor "
                    "active, no OFU (the ladder stops at GPU-Util)",
                )
            )
        if "measured_peak_flops" in gpu:
            out.append(_check(f"{label} measured peak", OK, gpu["measured_peak_source"]))
        else:
            out.append(
                _check(
                    f"{label} measured peak",
                    INFO,
                    "none here (python -m trainmeter.hardware.measure_peak on an idle GPU)",
                )
            )
    return out


def _cgroup() -> dict[str, str]:
    import psutil

    from trainmeter.sources import cgroup
    from trainmeter.sources.files import Files

    rep = cgroup.read_cgroup(Files())
    lim, why = cgroup.limits(Files(), psutil.virtual_memory().total, psutil.cpu_count())
    if lim:
        return _check("cgroup", OK, f"limits below the host: {json.dumps(lim)}")
    return _check("cgroup", INFO, f"{rep.version or 'none'}: {why}")


def _agent(python: str | None, env: dict[str, str]) -> list[dict[str, str]]:
    import trainmeter

    out = []
    boot = Path(trainmeter.__file__).parent / "agent" / "bootstrap" / "sitecustomize.py"
    if boot.exists():
        out.append(_check("agent", OK, f"bootstrap at {boot.parent} (tm puts it on PYTHONPATH)"))
    else:
        out.append(_check("agent", NO, f"bootstrap missing at {boot}: broken install"))
    if env.get(ENV_DISABLE) == "1":
        out.append(_check("agent env", NO, "TRAINMETER_DISABLE=1: the agent does nothing"))
    # `tm train.py` runs the current interpreter: ask about it unless told another one.
    out.append(_python_check(python or sys.executable, env))
    return out


def _python_check(python: str, env: dict[str, str]) -> dict[str, str]:
    from trainmeter.supervisor.python_check import why_silent

    try:
        reason = why_silent(python, env)
    except Exception as exc:  # noqa: BLE001 - a failing diagnosis is itself the answer
        return _check("agent in python", NO, f"diagnosis failed: {type(exc).__name__}: {exc}")
    if not reason:
        return _check("agent in python", OK, f"{python} loads the agent")
    return _check("agent in python", NO, f"{python}: {reason}")


def run_checks(python: str | None = None, env: dict[str, str] | None = None) -> list[dict]:
    env = dict(os.environ if env is None else env)
    checks = [_check("interpreter", INFO, f"{sys.executable} {sys.version.split()[0]}"), _psutil()]
    for part in (lambda: _gpus(env), lambda: [_cgroup()], lambda: _agent(python, env)):
        try:
            checks.extend(part())
        except Exception as exc:  # noqa: BLE001 - one broken check never hides the others
            checks.append(_check("doctor", NO, f"a check failed: {type(exc).__name__}: {exc}"))
    return checks


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tm doctor", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--python", metavar="PATH", help="say why this interpreter would run without the agent"
    )
    args = parser.parse_args(argv)
    checks = run_checks(args.python)
    if args.json:
        print(json.dumps(checks, indent=1))
        return 0
    width = max(len(c["check"]) for c in checks)
    for c in checks:
        print(f"{c['status']:>2}  {c['check']:<{width}}  {c['detail']}")
    return 0
