"""The agent's entry point inside every Python process `tm` starts (called by sitecustomize).

`start()` says `hello` at once (so even a script that never imports torch is seen), then waits
for the user's own `import torch` to attach the probes: importing torch ourselves would cost
seconds and could change the run. Each probe attaches on its own; one that fails is left out of
`probes`, warns once, and the run goes on. When torch attaches, `hello` is sent again with the
probes that attached and the torch version; the engine unions the `probes` of every hello.
A tap is in `probes` only once its tracker was imported and wrapped (it then says `hello` again);
until then it is listed in `taps_armed`.
"""

from __future__ import annotations

import os
import sys

from ..payloads import HELLO
from ..records import ENV_DISABLE, ENV_NO_TAP
from . import importhook
from .probes import guard
from .sender import get_sender
from .state import STATE

TYPE_CHECKING = False  # typing costs ~9 ms in every Python the run starts
if TYPE_CHECKING:
    from typing import Any

DISABLE_ENV = ENV_DISABLE
NO_TAP_ENV = ENV_NO_TAP

_versions: dict[str, str] = {}
_armed: list[str] = []  # taps whose import hooks are registered
_started = False


def _int_env(name: str) -> int | None:
    try:
        return int(os.environ.get(name, "").strip())
    except ValueError:  # unset, empty, or not a number ("--1", "²"): unknown
        return None


def _first_int(*names: str) -> int | None:
    """The first of these variables that holds a number (torchrun's names, then Slurm's)."""
    for name in names:
        value = _int_env(name)
        if value is not None:
            return value
    return None


def _run_id() -> str | None:
    """The job's id shared by every node: torchrun's rendezvous id (not its default "none"),
    else the scheduler's job id."""
    for name in ("TORCHELASTIC_RUN_ID", "SLURM_JOB_ID"):
        value = os.environ.get(name, "").strip()
        if value and value != "none":
            return value[:200]
    return None


def say_hello() -> None:
    """Send `hello` with what is known now; taps may call this again after they attach."""
    sender = get_sender()
    if sender is None:
        return
    world = _int_env("WORLD_SIZE")
    d = HELLO.build(
        world_size=world if world and world > 0 else 1,
        local_rank=_first_int("LOCAL_RANK", "SLURM_LOCALID"),
        # where this process sits in a job of several nodes (docs/ranks.md)
        local_world_size=_first_int("LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE"),
        node_rank=_first_int("GROUP_RANK", "SLURM_NODEID"),
        nodes=_first_int("GROUP_WORLD_SIZE", "SLURM_NNODES"),
        run_id=_run_id(),
        rank=sender.rank,
        probes=list(STATE.probes),
        taps_armed=[name for name in _armed if name not in STATE.probes],
        python=sys.version.split()[0],
        executable=sys.executable,
        argv0=sys.argv[0] if getattr(sys, "argv", None) else None,
        pid=os.getpid(),
        ppid=os.getppid(),
        versions=dict(_versions),
    )
    sender.send(HELLO.name, d)


def _probe_modules() -> list[tuple[str, Any]]:
    from .probes import (
        architecture,
        collectives,
        device,
        flops,
        memory,
        model,
        phases,
        precision,
        steps,
    )

    # steps first: the others ride on its hooks and listeners
    return [
        ("steps", steps),
        ("model", model),
        ("architecture", architecture),
        ("precision", precision),
        ("phases", phases),
        ("flops", flops),
        ("device", device),
        ("memory", memory),
        ("collectives", collectives),
    ]


def attach_torch(torch: Any) -> None:
    """Called right after the user's `import torch` finished: install every probe."""
    _versions["torch"] = str(getattr(torch, "__version__", "?"))
    for name, module in _probe_modules():
        if guard.is_off("steps") and name != "steps":
            guard.off(name, "the steps probe it rides on is off")
            continue
        try:
            for probe in module.attach(torch):
                guard.attached(probe)
        except Exception as exc:  # noqa: BLE001 - promise 1: this probe is off, others go on
            guard.off(name, exc)
    say_hello()


def _tap_attached(name: str) -> None:
    """A tap wrapped its tracker (the user imported it): tell `tm` with another hello."""
    say_hello()


def _install_taps() -> None:
    """Arm the taps' import hooks. A tap's name goes into `STATE.probes` (the taps package adds
    it) only when it attaches; armed ones are reported as `taps_armed`."""
    try:
        from . import taps
    except Exception as exc:  # noqa: BLE001 - promise 1: the run goes on without the taps
        guard.off("taps", exc)
        return
    install_all = getattr(taps, "install_all", None)
    if install_all is None:
        return
    try:
        names = install_all(on_attach=_tap_attached)
    except Exception as exc:  # noqa: BLE001 - promise 1
        guard.off("taps", exc)
        return
    _armed[:] = [name for name in names or () if isinstance(name, str)]


def taps_wanted() -> bool:
    """The one place the no-tap switch (`tm --no-tap`) is read."""
    return os.environ.get(NO_TAP_ENV) != "1"


def start() -> None:
    """Say hello and wait for torch. A no-op outside `tm` or with TRAINMETER_DISABLE=1."""
    global _started
    if _started or os.environ.get(DISABLE_ENV) == "1":
        return
    if get_sender() is None:
        return
    _started = True
    STATE.taps_enabled = taps_wanted()
    if STATE.taps_enabled:
        _install_taps()
    from . import ring  # noqa: F401 - keeps every rare record (this hello first) in the ring

    try:
        from . import lifecycle

        lifecycle.install()  # an exec or os._exit keeps what this process recorded
    except Exception as exc:  # noqa: BLE001 - promise 1: the run goes on without it
        guard.off("lifecycle", exc)
    say_hello()
    try:
        from . import crash

        crash.install()  # why the process died, told on the way out (agent/crash.py)
    except Exception as exc:  # noqa: BLE001 - promise 1: the run goes on without it
        guard.off("crash", exc)
    importhook.when_imported("torch", _guarded_attach)


def _guarded_attach(torch: Any) -> None:
    try:
        attach_torch(torch)
    except Exception as exc:  # noqa: BLE001 - promise 1
        guard.off("agent", exc)
