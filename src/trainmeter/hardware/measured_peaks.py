"""Measured peak files: what `python -m trainmeter.hardware.measure_peak` wrote for one GPU on one node.

A measured peak is labelled as measured wherever it shows (promise 5): the row carries
`measured_peak_flops` (FLOP/s) beside `measured_peak_source`, a sentence that says where, when
and how it was timed. The datasheet peak stays the engine's business.

Location: $TRAINMETER_PEAKS_DIR, else $XDG_CACHE_HOME/trainmeter/peaks, else
~/.cache/trainmeter/peaks; one file `<hostname>-<gpu uuid>.json` a GPU.
"""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..agent.inputs import read_text
from ..records import ENV_PEAKS_DIR

FORMAT = "trainmeter-peak/1"


def peaks_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get(ENV_PEAKS_DIR):
        return Path(env[ENV_PEAKS_DIR])
    cache = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "trainmeter" / "peaks"


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", text)


def peak_path(uuid: str, hostname: str | None = None, env: Mapping[str, str] | None = None) -> Path:
    host = hostname or socket.gethostname()
    return peaks_dir(env) / f"{_safe(host)}-{_safe(uuid)}.json"


def write_peak(record: dict[str, Any], env: Mapping[str, str] | None = None) -> Path:
    """Write one measured peak record (see measure_peak) to its file; return the path."""
    path = peak_path(record["uuid"], record.get("hostname"), env)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"format": FORMAT, **record}, indent=1) + "\n")
    tmp.replace(path)
    return path


#: A peak file is a few hundred bytes; past this a file is not one.
MAX_PEAK_FILE_BYTES = 1 << 20


def _read_text(path: str) -> str | None:
    try:
        return read_text(path, MAX_PEAK_FILE_BYTES, "measured peak file")
    except (OSError, ValueError):
        return None


def read_peak(
    uuid: str,
    hostname: str | None = None,
    env: Mapping[str, str] | None = None,
    read_text: Callable[[str], str | None] = _read_text,
) -> dict[str, Any] | None:
    """The row fields for this GPU's measured peak, or None when there is no usable file.
    `read_text` lets `tm hardware --dump` record the file and a dump replay it."""
    path = peak_path(uuid, hostname, env)
    try:
        data = json.loads(read_text(str(path)) or "")
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("uuid") != uuid:
        return None
    tflops = data.get("tflops")
    if isinstance(tflops, bool) or not isinstance(tflops, (int, float)) or not tflops > 0:
        return None
    sizes = data.get("sizes") or []
    source = (
        f"measured: dense {data.get('dtype', 'bf16')} matmul"
        f"{' n=' + '/'.join(str(s) for s in sizes) if sizes else ''} on {data.get('device_name', '?')}"
        f" ({data.get('hostname', '?')}, {data.get('date', '?')}, torch {data.get('torch', '?')});"
        f" file {path}"
    )
    return {"measured_peak_flops": float(tflops) * 1e12, "measured_peak_source": source}
