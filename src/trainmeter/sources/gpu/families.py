"""Which GPU library answers: the one place a backend is picked.

Each device family is one door behind the `Backend` seam (`backend.py`) and one row of
`FAMILIES`: its name, the variable that names a fixture its fake replays, its real backend and
that fake. The first family whose fake is named answers from the fixture (tests, bug reports);
otherwise the real doors are tried in order and the first whose `init` succeeds answers. A new
GPU family is a door module (answering `Backend.query` in NVML's units, raising its own
`GpuError` subclass) and one row here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ...records import ENV_FAKE_NVML
from .amd import AmdsmiBackend
from .amd_fake import ENV_FAKE_AMDSMI, FakeAmdsmi
from .backend import Backend, GpuError
from .fake import FORMAT, FakeBackend
from .nvml import PynvmlBackend


class Family:
    """One device family: `real()` its door, `fake(fixture)` its replay (a plain record)."""

    __slots__ = ("name", "fake_env", "real", "fake")

    def __init__(
        self,
        name: str,
        fake_env: str,
        real: Callable[[], Backend],
        fake: Callable[[str], Backend],
    ) -> None:
        self.name = name
        self.fake_env = fake_env
        self.real = real
        self.fake = fake


def _nvml_fake(fixture: str) -> Backend:
    """The NVML fake over a fixture or a `tm hardware --dump` file; one it cannot read is a
    card whose NVML could not start, with the reason (never an exception out of `tm`)."""
    try:
        return FakeBackend(fixture)
    except (OSError, ValueError, RecursionError) as exc:  # missing, truncated, `[]`, random bytes
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)[:200]
        return FakeBackend(
            {"format": FORMAT, "init": {"error": "Unknown", "detail": f"{ENV_FAKE_NVML}: {why}"}}
        )


#: The families in the order they are tried: NVIDIA first (the one most machines have).
FAMILIES: tuple[Family, ...] = (
    Family("nvidia", ENV_FAKE_NVML, PynvmlBackend, _nvml_fake),
    Family("amd", ENV_FAKE_AMDSMI, AmdsmiBackend, lambda f: AmdsmiBackend(FakeAmdsmi(f))),
)


def backend_from_env(env: Mapping[str, str]) -> Backend:
    """A family's fake when its variable names a fixture (how tests and demos on a GPU-less
    machine run `tm`, `tm hardware` and `tm doctor` over a recorded card), else the real
    doors, the first that starts answering."""
    for family in FAMILIES:
        fixture = env.get(family.fake_env)
        if fixture:
            return family.fake(fixture)
    return FirstBackend(*(family.real() for family in FAMILIES))


class FirstBackend:
    """The first backend whose `init` succeeds answers. When none starts, the first one's
    reason stands (NVML's: the one most machines need), with the others' beside it."""

    def __init__(self, *backends: Backend) -> None:
        self.backends = backends
        self.chosen: Backend | None = None

    def init(self) -> None:
        errors: list[GpuError] = []
        for backend in self.backends:
            try:
                backend.init()
            except GpuError as exc:
                errors.append(exc)
                continue
            self.chosen = backend
            return
        first = errors[0]
        rest = "; ".join(e.reason for e in errors[1:])
        raise type(first)(
            first.name, f"{first.detail}{'; ' if first.detail else ''}{rest}".strip("; ")
        )

    def _need(self) -> Backend:
        if self.chosen is None:
            raise GpuError("Uninitialized")
        return self.chosen

    def shutdown(self) -> None:
        if self.chosen is not None:
            self.chosen.shutdown()

    def versions(self) -> dict[str, Any]:
        return self._need().versions()

    def device_count(self) -> int:
        return self._need().device_count()

    def query(self, index: int, op: str) -> Any:
        return self._need().query(index, op)
