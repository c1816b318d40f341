"""A snapshot in the Prometheus exposition format, and a scrape endpoint that serves nothing else.

Prometheus (a distributed monitoring system of its own) is where many nodes' numbers meet: each
node's `tm` exposes its own node, labelled with the job's `run` id and its `node` rank, and the
sums and maxima over nodes are PromQL's job (grafana/trainmeter.json, docs/prometheus.md). So a
metric here is always this node's: tokens/s of its ranks, its GPUs' ladder, its ranks' step
times. A number the snapshot leaves absent is not exported (no zero stands in for unknown).

`render(snapshot, labels)` is what the dashboard's `/metrics` calls; `MetricsServer` is the live
view behind `--metrics-addr HOST:PORT`: read-only, `/metrics` alone, 404 anywhere else.
prometheus-client is imported only when one of the two is used.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..snapread import finite as _num
from ..snapread import get
from . import httpd

PREFIX = "trainmeter_"
LADDER_RUNGS = ("gpu_util", "sm_active", "tensor_active", "ofu", "mfu")


def labels_for(snap: dict[str, Any], fallback_run: str | None = None) -> dict[str, str]:
    """{run, node}: the job's run id shared by its nodes (else this run's own name) and the
    node rank. Without a shared run id each node is a run of its own (docs/ranks.md)."""
    job = _dict(snap.get("job"))
    run_id = job.get("run_id")
    if job.get("run_id_source") == "launcher" and (job.get("nodes") or 1) < 2:
        run_id = None  # torchrun --standalone makes up a uuid: the run's own name says more
    run = run_id or fallback_run or (snap.get("run") or {}).get("name") or "run"
    node = job.get("node_rank")
    return {"run": str(run), "node": str(node if node is not None else 0)}


class Family:
    """One metric family: its name (without the `trainmeter_` prefix), kind, help text and the
    labels its samples carry beside `run` and `node`. A counter's samples are exposed with
    `_total` (prometheus-client adds it), so `rate()` and `increase()` apply to them.

    Immutable, compared by its four fields: a plain class, as `Fact` is, where a frozen
    dataclass imported `dataclasses` (~8 ms with `inspect`) into `tm view`'s start."""

    __slots__ = ("name", "kind", "doc", "labels")
    name: str
    kind: str  # "gauge" or "counter" (a number that only grows)
    doc: str
    labels: tuple[str, ...]

    def __init__(self, name: str, kind: str, doc: str, labels: tuple[str, ...] = ()) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "doc", doc)
        object.__setattr__(self, "labels", labels)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}")

    def _fields(self) -> tuple[str, str, str, tuple[str, ...]]:
        return (self.name, self.kind, self.doc, self.labels)

    def __reduce__(self) -> tuple[type[Family], tuple[str, str, str, tuple[str, ...]]]:
        return (Family, self._fields())  # rebuilt through `__init__`: assignment is refused

    def __eq__(self, other: object) -> bool:
        return self._fields() == other._fields() if isinstance(other, Family) else NotImplemented

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return (f"Family(name={self.name!r}, kind={self.kind!r}, doc={self.doc!r}, "
                f"labels={self.labels!r})")


_LADDER_DOC = "Utilization ladder per GPU: gpu_util, sm_active, tensor_active, ofu, mfu (0..1)"
_FACTOR_DOC = (
    "MFU waterfall: the share of the dense peak each factor keeps (the steps-scope factors "
    "multiply to the MFU; above 1 is not clipped)"
)
_WHOLE_RUN_DOC = (
    "window / elapsed x MFU: the model FLOPs of the whole run as a share of the peak, at the "
    "steady rate"
)

#: Per rank, from the caching allocator (CUDA, MPS) and the process (RSS), where the snapshot
#: has a `memory` part: (field of a `memory.ranks` row, family, help).
MEMORY = (
    ("allocated_b", "memory_allocated_bytes", "Bytes the caching allocator has handed out, per rank"),
    ("allocated_peak_b", "memory_allocated_peak_bytes", "Highest allocated bytes, per rank"),
    ("reserved_b", "memory_reserved_bytes", "Bytes the caching allocator holds on the card, per rank"),
    ("reserved_peak_b", "memory_reserved_peak_bytes", "Highest reserved bytes, per rank"),
    ("total_b", "memory_total_bytes", "The card's total memory, per rank"),
    ("alloc_retries", "memory_alloc_retries", "Allocations retried after freeing the cache, per rank"),
    ("ooms", "memory_ooms", "Out-of-memory errors the allocator raised, per rank"),
    ("rss_b", "memory_rss_bytes", "Resident memory of the rank's process"),
)

#: Every family, in the order of the exposition. `_samples` says where each value comes from.
FAMILIES: tuple[Family, ...] = (
    Family("info", "gauge", "This node of the job: 1, with the job's shape in labels",
           ("nodes", "world_size", "clock_rank")),
    Family("node_ranks", "gauge", "Ranks on this node"),
    Family("world_size", "gauge", "Ranks in the whole job"),
    Family("steps", "counter", "Optimizer steps taken (this node's clock rank)"),
    Family("tokens", "counter", "Tokens seen by this node's data-parallel ranks"),
    Family("tokens_per_second", "gauge", "Tokens per second on this node"),
    Family("step_time_seconds", "gauge", "Seconds per optimizer step (this node's clock rank)"),
    Family("mfu_ratio", "gauge", "Model FLOPs utilization (0..1) under the named convention",
           ("convention",)),
    Family("mfu_by_convention_ratio", "gauge", "MFU under each FLOPs convention", ("convention",)),
    Family("gpus", "gauge", "GPUs this node's ranks use"),
    Family("ofu_ratio", "gauge", "Observed FLOPs utilization (0..1) from the GPUs' counters",
           ("convention",)),
    Family("gpu_ladder_ratio", "gauge", _LADDER_DOC, ("gpu", "rung")),
    Family("mfu_waterfall_factor", "gauge", _FACTOR_DOC,
           ("factor", "scope", "convention", "merged")),
    Family("mfu_waterfall_whole_run_ratio", "gauge", _WHOLE_RUN_DOC, ("convention",)),
    Family("progress_ratio", "gauge", "Share of the budget done (0..1)"),
    Family("eta_seconds", "gauge", "Seconds left at the current pace"),
    Family("goodput_ratio", "gauge", "Share of wall time spent in training steps (0..1)"),
    Family("elapsed_seconds", "gauge", "Wall time since the run started"),
    Family("energy_joules", "counter", "GPU energy used since the run started"),
    Family("energy_per_token_joules", "gauge", "GPU energy per token"),
    Family("gpu_energy_joules", "counter", "GPU energy used since the run started, per GPU",
           ("gpu",)),
    Family("rank_step_time_seconds", "gauge", "Seconds per step of each rank", ("rank",)),
    Family("rank_compute_per_step_seconds", "gauge",
           "Seconds per step each rank spends computing (its step less its waits for the others)",
           ("rank",)),
    Family("rank_wait_per_step_seconds", "gauge",
           "Seconds per step each rank waits for the others in collectives", ("rank",)),
    Family("rank_waited_seconds", "counter",
           "Seconds each rank waited for the others in collectives since the run started",
           ("rank",)),
    Family("straggler_extra_seconds", "gauge",
           "Seconds per step the rank named slow computes over the others' median (0: none)",
           ("rank",)),
    *(Family(name, "gauge", doc, ("rank", "device")) for _field, name, doc in MEMORY),
    Family("alerts", "gauge", "Alerts standing now, all kinds"),
    Family("alert", "gauge", "Alerts standing now, by kind", ("kind",)),
)
FAMILY = {family.name: family for family in FAMILIES}

Sample = tuple[str, Any, dict[str, Any]]  # (family name, value, its own labels)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _waits(snap: dict[str, Any]) -> Iterator[Sample]:
    """Each rank's compute and wait per step, and the straggler's extra compute per rank (its
    ranks, for a slow node); every rank that reported its waits gets the gauge, 0 when it is not
    the one named, so a graph of it shows when a rank started and stopped holding the job."""
    rows = _dict(get(snap, "comm.ranks"))
    named = _dict(snap.get("straggler"))
    slow = {str(r) for r in named.get("ranks") or []}
    for rank, row in rows.items():
        if isinstance(row, dict):
            yield "rank_compute_per_step_seconds", row.get("compute_s"), {"rank": rank}
            yield "rank_wait_per_step_seconds", row.get("wait_s"), {"rank": rank}
            yield "rank_waited_seconds", row.get("wait_total_s"), {"rank": rank}
            extra = named.get("extra_s") if rank in slow else 0.0
            yield "straggler_extra_seconds", extra, {"rank": rank}


def _samples(snap: dict[str, Any]) -> Iterator[Sample]:
    """Every sample of one snapshot, absent numbers included (`families` leaves them out)."""
    job = _dict(snap.get("job"))
    yield "info", 1, {"nodes": job.get("nodes", 1), "world_size": job.get("world_size", 1),
                      "clock_rank": job.get("clock_rank", 0)}
    yield "node_ranks", len(job.get("ranks") or []) or None, {}
    yield "world_size", job.get("world_size"), {}
    yield "steps", snap.get("steps"), {}
    yield "tokens", snap.get("tokens_seen"), {}
    yield "tokens_per_second", snap.get("tokens_per_s"), {}
    yield "step_time_seconds", snap.get("step_time_s"), {}
    yield "mfu_ratio", get(snap, "mfu.value"), {
        "convention": get(snap, "mfu.convention") or "declared"
    }
    for conv, value in _dict(get(snap, "mfu.by_convention")).items():
        yield "mfu_by_convention_ratio", value, {"convention": conv}
    yield "gpus", get(snap, "n_gpus.value"), {}
    yield "ofu_ratio", get(snap, "ofu.value"), {
        "convention": get(snap, "ofu.convention") or "counters"
    }
    for gpu, rungs in _dict(get(snap, "ladder.gpus")).items():
        for rung in LADDER_RUNGS:
            yield "gpu_ladder_ratio", get(rungs, rung), {"gpu": gpu, "rung": rung}
    yield from _waterfall(snap)
    yield "progress_ratio", snap.get("progress"), {}
    yield "eta_seconds", snap.get("eta_s"), {}
    yield "goodput_ratio", get(snap, "time.goodput"), {}
    yield "elapsed_seconds", get(snap, "time.elapsed_s"), {}
    yield "energy_joules", get(snap, "energy.joules"), {}
    yield "energy_per_token_joules", get(snap, "energy.joules_per_token"), {}
    for gpu, joules in _dict(get(snap, "energy.per_gpu")).items():
        yield "gpu_energy_joules", joules, {"gpu": gpu}
    if _dict(snap.get("ranks")):
        for rank, seconds in _dict(get(snap, "ranks.step_time_s")).items():
            yield "rank_step_time_seconds", seconds, {"rank": rank}
    else:
        yield "rank_step_time_seconds", snap.get("step_time_s"), {"rank": job.get("clock_rank", 0)}
    yield from _waits(snap)
    for rank, row in _dict(get(snap, "memory.ranks")).items():
        if isinstance(row, dict):
            for field, name, _doc in MEMORY:
                yield name, row.get(field), {"rank": rank, "device": row.get("device") or "?"}
    counts: dict[str, int] = {}
    for alert in snap.get("alerts") or []:
        if isinstance(alert, dict) and isinstance(alert.get("kind"), str):
            counts[alert["kind"]] = counts.get(alert["kind"], 0) + 1
    yield "alerts", sum(counts.values()), {}
    for kind, n in sorted(counts.items()):
        yield "alert", n, {"kind": kind}


def _waterfall(snap: dict[str, Any]) -> Iterator[Sample]:
    """The MFU waterfall's factors (docs/waterfall.md), one sample per measured factor.

    The `steps` factors multiply to the MFU under `convention`; the `run` factor (window /
    elapsed) scales the peak to the training window. A factor the waterfall lists as absent has
    no sample (its loss is inside `model_vs_executed`, whose `merged` label names them)."""
    wf = _dict(snap.get("waterfall"))
    if not wf:
        return
    convention = wf.get("convention") or "declared"
    for factor in wf.get("factors") or []:
        if not isinstance(factor, dict) or not isinstance(factor.get("name"), str):
            continue
        labels = {"factor": factor["name"], "scope": factor.get("scope") or "steps",
                  "convention": convention, "merged": ",".join(factor.get("merged") or [])}
        yield "mfu_waterfall_factor", factor.get("value"), labels
    whole = (wf.get("whole_run") or {}).get("value")
    yield "mfu_waterfall_whole_run_ratio", whole, {"convention": convention}


def families(snap: dict[str, Any], labels: dict[str, str]) -> list[Any]:
    """The metric families of one snapshot (this node's numbers), `labels` on every sample.

    A family with no sample is left out, and so is a sample whose number is absent: no zero
    stands in for unknown."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    make = {"gauge": GaugeMetricFamily, "counter": CounterMetricFamily}
    built: dict[str, tuple[Any, list[str]]] = {}
    for name, value, own in _samples(snap):
        v = _num(value)
        if v is None:
            continue
        merged = {**labels, **{k: str(x) for k, x in own.items()}}
        if name not in built:
            spec = FAMILY[name]
            names = list({**labels, **dict.fromkeys(spec.labels)})
            built[name] = (make[spec.kind](PREFIX + name, spec.doc, labels=names), names)
        family, names = built[name]
        family.add_metric([merged[k] for k in names], v)
    return [built[f.name][0] for f in FAMILIES if f.name in built]


class _Collector:
    def __init__(self, snap: dict[str, Any], labels: dict[str, str]) -> None:
        self.snap, self.labels = snap, labels

    def collect(self) -> Iterator[Any]:
        yield from families(self.snap, self.labels)


def render(snapshot: dict[str, Any], labels: dict[str, str] | None = None) -> tuple[bytes, str]:
    """(body, content type) of `/metrics` for this snapshot.

    `run` and `node` come from the snapshot's job (`labels_for`); a `run` in `labels` names the
    run when the job has no shared run id (the dashboard passes the run's name); any other
    label in `labels` is added to every sample."""
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

    given = dict(labels or {})
    base = labels_for(snapshot, given.pop("run", None))  # a shared run id wins over a name
    base.update({k: str(v) for k, v in given.items() if k not in base})
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(snapshot, base))
    return generate_latest(registry), CONTENT_TYPE_LATEST


class MetricsServer:
    """Live view: `/metrics` of the latest snapshot on the address the user named, nothing else.

    Read-only by construction: it answers GET and HEAD of `/metrics` and 404 (or 405 for other
    methods); it never touches the run. It is served by the one event loop of `httpd.py`, so a
    crowd of idle or slow connections on a reachable address neither locks the scraper out nor
    takes `tm`'s threads and descriptors. It stops when the run ends.
    """

    name = "metrics"

    def __init__(self, addr: tuple[str, int], run_dir: Path | None) -> None:
        import prometheus_client  # noqa: F401 - fail here, at start, when it is not installed

        self.fallback_run = run_dir.name if run_dir is not None else None
        self._snap: dict[str, Any] = {}
        self._lock = threading.Lock()
        sock = socket.socket(socket.AF_INET6 if ":" in addr[0] else socket.AF_INET)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(addr)
            sock.listen(1024)
        except OSError:
            sock.close()
            raise
        self._server = httpd.LoopServer(sock, self._answer)
        self.address = self._server.server_address[:2]
        self._thread = httpd.serve_in_thread(self._server, "tm-metrics")

    def _answer(self, request: httpd.Request) -> httpd.Response:
        if request.method not in ("GET", "HEAD"):
            return httpd.Response(405, b"read-only: GET /metrics\n", close=True,
                                  headers={"Allow": "GET, HEAD"})
        if request.path != "/metrics":
            return httpd.Response(404, b"not found: only /metrics is served here\n")
        body, ctype = self.body()
        return httpd.Response(200, body, ctype)

    def body(self) -> tuple[bytes, str]:
        with self._lock:
            snap = self._snap
        return render(snap, labels_for(snap, self.fallback_run))

    def on_snapshot(self, snap: dict[str, Any], now: float) -> None:
        with self._lock:
            self._snap = snap

    def on_finish(self, snap: dict[str, Any]) -> None:
        with self._lock:
            self._snap = snap
        self.close()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
