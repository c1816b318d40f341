"""Shared by the sources tests (imported by name: tests/ has no packages)."""

from __future__ import annotations

from pathlib import Path

NVML_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvml"


class Clock:
    """A monotonic clock the test moves by hand, so GPM and NVLink windows are exact."""

    def __init__(self, t: float = 100.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def fixture_path(name: str) -> Path:
    return NVML_FIXTURES / f"{name}.json"
