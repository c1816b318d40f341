"""A backend that replays recorded NVML answers from a JSON fixture.

Fixture format (`trainmeter-nvml/1`), the same the recorder writes and `tm hardware --dump`
packs::

    {"format": "trainmeter-nvml/1", "note": "how it was made",
     "init": null | {"error": "LibraryNotFound"},
     "versions": {"driver": "...", "nvml": "...", "cuda": 12040},
     "devices": [{"ops": {"name": ["NVIDIA H100 80GB HBM3"], "power_mw": [612000, ...], ...}}]}

Each op holds the answers of its successive calls: the k-th call returns the k-th answer, and
the last answer repeats once the list runs out (so a static op needs one). An answer
``{"error": "NotSupported"}`` raises `NvmlError("NotSupported")`; an op the device lacks
altogether raises `NotSupported`, which is what an old card answers.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from ...agent.inputs import read_bytes
from .nvml import NvmlError

FORMAT = "trainmeter-nvml/1"


#: A fixture or dump is a few hundred kilobytes; past this a file is not one (`/dev/zero`).
MAX_FIXTURE_BYTES = 64 << 20


def load_fixture(source: str | Path | dict[str, Any]) -> dict[str, Any]:
    """A fixture dict from a path, a JSON string's file, or a dict (a dump's `nvml` part).
    ValueError (with the reason) for anything that is not one; OSError when it cannot be read."""
    if isinstance(source, dict):
        data = source
    else:
        data = json.loads(read_bytes(Path(source), MAX_FIXTURE_BYTES, "fixture").decode("utf-8"))
        if isinstance(data, dict) and "nvml" in data and "devices" not in data:  # a dump
            data = data["nvml"]
    if not isinstance(data, dict):
        raise ValueError(f"not a {FORMAT} fixture: a JSON {type(data).__name__}, not an object")
    if data.get("format") != FORMAT:
        raise ValueError(f"not a {FORMAT} fixture: format {data.get('format')!r}")
    devices = data.get("devices", [])
    if not isinstance(devices, list) or not all(
        isinstance(d, dict) and isinstance(d.get("ops", {}), dict) for d in devices
    ):
        raise ValueError(f"not a {FORMAT} fixture: `devices` is not a list of objects")
    return data


def _is_error(answer: Any) -> bool:
    return isinstance(answer, dict) and set(answer) == {"error"}


class FakeBackend:
    """Replays a fixture. `calls` counts each (index, op) so tests can see what was asked."""

    def __init__(self, fixture: str | Path | dict[str, Any]) -> None:
        self.fixture = load_fixture(fixture)
        self.calls: dict[tuple[int, str], int] = defaultdict(int)
        self.initialized = False
        self.shutdowns = 0

    def init(self) -> None:
        failure = self.fixture.get("init")
        if failure:
            raise NvmlError(str(failure.get("error")), str(failure.get("detail") or ""))
        self.initialized = True

    def shutdown(self) -> None:
        self.shutdowns += 1
        self.initialized = False

    def versions(self) -> dict[str, Any]:
        self._need()
        return dict(self.fixture.get("versions") or {})

    def device_count(self) -> int:
        self._need()
        return len(self.fixture.get("devices") or [])

    def query(self, index: int, op: str) -> Any:
        self._need()
        devices = self.fixture.get("devices") or []
        if not 0 <= index < len(devices):
            raise NvmlError("InvalidArgument", f"no device {index}")
        answers = devices[index].get("ops", {}).get(op)
        k = self.calls[(index, op)]
        self.calls[(index, op)] = k + 1
        if not answers:
            raise NvmlError("NotSupported")
        answer = answers[min(k, len(answers) - 1)]
        if _is_error(answer):
            raise NvmlError(answer["error"])
        return answer

    def _need(self) -> None:
        if not self.initialized:
            raise NvmlError("Uninitialized")
