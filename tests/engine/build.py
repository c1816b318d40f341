"""A tiny helper to build record streams by hand, in the wire schema of `records.py`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainmeter import records
from trainmeter.engine import Engine

H100 = "NVIDIA H100 80GB HBM3"
REPO_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def rec(kind: str, t: float, rank: int | None = 0, src: str = "agent", **d: Any) -> dict[str, Any]:
    """One record; `d` given as keyword arguments. Checked against the wire schema."""
    return records.validate(records.make(kind, d, t=t, src=src, rank=rank, pid=1000 + (rank or 0)))


def start(t: float = 0.0, **declared: Any) -> dict[str, Any]:
    return rec("run.start", t, rank=None, src="tm", argv=["train.py"], declared=declared)


def hello(t: float, world_size: int = 1, probes: tuple[str, ...] = ("steps",), rank: int = 0):
    return rec("hello", t, rank=rank, world_size=world_size, probes=list(probes))


def fact(t: float, key: str, value: Any, source: str = "detected", rank: int = 0, note=None):
    d: dict[str, Any] = {"key": key, "value": value, "source": source}
    if note is not None:
        d["note"] = note
    return rec("fact", t, rank=rank, **d)


def device(t: float, name: str = H100, index: int = 0, rank: int = 0) -> dict[str, Any]:
    return fact(t, "device", {"name": name, "index": index, "uuid": f"GPU-{index}"}, rank=rank)


def step(t: float, tokens: float | None = None, k: int = 1, rank: int = 0, **extra: Any):
    d: dict[str, Any] = {"k": k, **extra}
    if tokens is not None:
        d["tokens"] = tokens
    return rec("step", t, rank=rank, **d)


def steps(t0: float, dt: float, count: int, tokens: float | None = None, rank: int = 0, **extra):
    """`count` step records of one step each, `dt` seconds apart, the first at `t0`."""
    return [step(t0 + i * dt, tokens, rank=rank, **extra) for i in range(count)]


def phase(t: float, name: str, s: float, n: int = 1, rank: int = 0) -> dict[str, Any]:
    return rec("phase", t, rank=rank, name=name, s=s, n=n)


def gpu_row(index: int = 0, name: str = H100, **fields: Any) -> dict[str, Any]:
    return {"index": index, "uuid": f"GPU-{index}", "name": name, **fields}


def gpu(t: float, *rows: dict[str, Any], selected_by: str = "process") -> dict[str, Any]:
    return rec("sample.gpu", t, rank=None, src="tm", gpus=list(rows), selected_by=selected_by)


def end(t: float, exit_status: int = 0) -> dict[str, Any]:
    return rec("run.end", t, rank=None, src="tm", exit_status=exit_status)


def run(*streams: Any, now: float | None = None) -> dict[str, Any]:
    """Feed the records (records or nested lists of them, in order) and snapshot."""
    return engine_of(*streams).snapshot(now=now)


def flat(*streams: Any) -> list[dict[str, Any]]:
    """Records and (nested) lists of records, flattened in order."""
    out: list[dict[str, Any]] = []
    for item in streams:
        if isinstance(item, list):
            out.extend(flat(*item))
        else:
            out.append(item)
    return out


def engine_of(*streams: Any) -> Engine:
    engine = Engine()
    for r in flat(*streams):
        engine.feed(r)
    return engine
