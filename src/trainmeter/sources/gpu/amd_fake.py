"""A stand-in for the `amdsmi` module that replays recorded AMD SMI answers (what
`TRAINMETER_FAKE_AMDSMI` names: `families.py` picks it).

Fixture format (`trainmeter-amdsmi/1`)::

    {"format": "trainmeter-amdsmi/1", "note": "how it was made",
     "init": null | {"error": "AMDSMI_STATUS_DRIVER_NOT_LOADED"},
     "lib_version": {"major": 6, "minor": 4, "release": 0},
     "devices": [{"calls": {"amdsmi_get_gpu_activity": [{"gfx_activity": 97, ...}, ...],
                            "amdsmi_get_clock_info:GFX": [{"clk": 2100, "max_clk": 2100}]}}]}

A call's key is the function's name, with the enum argument's name after a colon where the
call takes one (clock type; the temperature sensor). As with the NVML fixtures, the k-th call
returns the k-th answer and the last repeats; `{"error": "AMDSMI_STATUS_NOT_SUPPORTED"}` raises
AMD SMI's library exception with that status; a call the device lacks raises NOT_SUPPORTED.
"""

from __future__ import annotations

import types
from collections import defaultdict
from pathlib import Path
from typing import Any

from ...agent.inputs import load_json

FORMAT = "trainmeter-amdsmi/1"
ENV_FAKE_AMDSMI = "TRAINMETER_FAKE_AMDSMI"
MAX_FIXTURE_BYTES = 64 << 20  # a fixture is kilobytes; past this it is not one (`/dev/zero`)


class AmdSmiLibraryException(Exception):
    """What the real binding raises: a status name in the message."""


def _enum(*names: str) -> types.SimpleNamespace:
    return types.SimpleNamespace(**{n: n for n in names})


class FakeAmdsmi:
    """The `amdsmi` functions the backend calls, answered from a fixture."""

    AmdSmiClkType = _enum("GFX", "MEM", "SYS")
    AmdSmiTemperatureType = _enum("EDGE", "HOTSPOT", "VRAM")
    AmdSmiTemperatureMetric = _enum("CURRENT", "MAX", "CRITICAL")
    AmdSmiLibraryException = AmdSmiLibraryException

    def __init__(self, fixture: str | Path | dict[str, Any]) -> None:
        data = fixture if isinstance(fixture, dict) else load_json(Path(fixture), MAX_FIXTURE_BYTES, "fixture")
        if data.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} fixture: format {data.get('format')!r}")
        self.fixture = data
        self.calls: dict[tuple[int, str], int] = defaultdict(int)
        self.shutdowns = 0

    def amdsmi_init(self, *flags: Any) -> None:
        failure = self.fixture.get("init")
        if failure:
            raise AmdSmiLibraryException(failure["error"])

    def amdsmi_shut_down(self) -> None:
        self.shutdowns += 1

    def amdsmi_get_processor_handles(self) -> list[int]:
        return list(range(len(self.fixture.get("devices") or [])))

    def amdsmi_get_lib_version(self) -> dict[str, Any]:
        return dict(self.fixture.get("lib_version") or {})

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("amdsmi_get_"):
            raise AttributeError(name)

        def call(handle: int, *enums: Any) -> Any:
            key = name if not enums else name + ":" + str(enums[0])
            answers = self.fixture["devices"][handle].get("calls", {}).get(key)
            k = self.calls[(handle, key)]
            self.calls[(handle, key)] = k + 1
            if not answers:
                raise AmdSmiLibraryException("AMDSMI_STATUS_NOT_SUPPORTED")
            answer = answers[min(k, len(answers) - 1)]
            if isinstance(answer, dict) and set(answer) == {"error"}:
                raise AmdSmiLibraryException(answer["error"])
            return answer

        return call
