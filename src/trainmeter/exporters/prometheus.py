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

import math
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

PREFIX = "trainmeter_"
LADDER_RUNGS = ("gpu_util", "sm_active", "tensor_active", "ofu", "mfu")


def labels_for(snap: dict[str, Any], fallback_run: str | None = None) -> dict[str, str]:
    """{run, node}: the job's run id shared by its nodes (else this run's own name) and the
    node rank. Without a shared run id each node is a run of its own (docs/ranks.md)."""
    job = snap.get("job") if isinstance(snap.get("job"), dict) else {}
    run_id = job.get("run_id")
    if job.get("run_id_source") == "launcher" and (job.get("nodes") or 1) < 2:
        run_id = None  # torchrun --standalone makes up a uuid: the run's own name says more
    run = run_id or fallback_run or (snap.get("run") or {}).get("name") or "run"
    node = job.get("node_rank")
    return {"run": str(run), "node": str(node if node is not None else 0)}


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


class _Families:
    """Builds metric families; a family with no sample is left out, so absent stays absent."""

    def __init__(self, labels: dict[str, str]) -> None:
        from prometheus_client.core import GaugeMetricFamily

        self._gauge = GaugeMetricFamily
        self.base = labels
        self.families: dict[str, Any] = {}

    def add(self, name: str, doc: str, value: Any, **extra: Any) -> None:
        v = _num(value)
        if v is None:
            return
        labels = {**self.base, **{k: str(x) for k, x in extra.items()}}
        family = self.families.get(name)
        if family is None:
            family = self.families[name] = self._gauge(PREFIX + name, doc, labels=list(labels))
        family.add_metric([labels[k] for k in family._labelnames], v)


def families(snap: dict[str, Any], labels: dict[str, str]) -> list[Any]:
    """The metric families of one snapshot (this node's numbers), labels on every sample."""
    f = _Families(labels)
    job = snap.get("job") if isinstance(snap.get("job"), dict) else {}
    f.add("info", "This node of the job: 1, with the job's shape in labels", 1,
          nodes=job.get("nodes", 1), world_size=job.get("world_size", 1),
          clock_rank=job.get("clock_rank", 0))  # fmt: skip
    f.add("node_ranks", "Ranks on this node", len(job.get("ranks") or []) or None)
    f.add("world_size", "Ranks in the whole job", job.get("world_size"))
    f.add("steps", "Optimizer steps taken (this node's clock rank)", snap.get("steps"))
    f.add("tokens", "Tokens seen by this node's data-parallel ranks", snap.get("tokens_seen"))
    f.add("tokens_per_second", "Tokens per second on this node", snap.get("tokens_per_s"))
    f.add("step_time_seconds", "Seconds per optimizer step (this node's clock rank)",
          snap.get("step_time_s"))  # fmt: skip
    mfu = snap.get("mfu") if isinstance(snap.get("mfu"), dict) else {}
    if _num(mfu.get("value")) is not None:
        f.add("mfu_ratio", "Model FLOPs utilization (0..1) under the named convention",
              mfu["value"], convention=mfu.get("convention") or "declared")  # fmt: skip
    for conv, value in (mfu.get("by_convention") or {}).items():
        f.add("mfu_by_convention_ratio", "MFU under each FLOPs convention", value, convention=conv)
    n_gpus = (
        (snap.get("n_gpus") or {}).get("value") if isinstance(snap.get("n_gpus"), dict) else None
    )
    f.add("gpus", "GPUs this node's ranks use", n_gpus)
    ofu = snap.get("ofu") if isinstance(snap.get("ofu"), dict) else {}
    f.add("ofu_ratio", "Observed FLOPs utilization (0..1) from the GPUs' counters", ofu.get("value"),
          convention=ofu.get("convention") or "counters")  # fmt: skip
    ladder = snap.get("ladder") if isinstance(snap.get("ladder"), dict) else {}
    for gpu, rungs in (ladder.get("gpus") or {}).items():
        for rung in LADDER_RUNGS:
            f.add("gpu_ladder_ratio", "Utilization ladder per GPU: gpu_util, sm_active, "
                  "tensor_active, ofu, mfu (0..1)", (rungs or {}).get(rung), gpu=gpu, rung=rung)  # fmt: skip
    _waterfall(f, snap)
    f.add("progress_ratio", "Share of the budget done (0..1)", snap.get("progress"))
    f.add("eta_seconds", "Seconds left at the current pace", snap.get("eta_s"))
    time_split = snap.get("time") if isinstance(snap.get("time"), dict) else {}
    f.add("goodput_ratio", "Share of wall time spent in training steps (0..1)",
          time_split.get("goodput"))  # fmt: skip
    f.add("elapsed_seconds", "Wall time since the run started", time_split.get("elapsed_s"))
    energy = snap.get("energy") if isinstance(snap.get("energy"), dict) else {}
    f.add("energy_joules", "GPU energy used since the run started", energy.get("joules"))
    f.add("energy_per_token_joules", "GPU energy per token", energy.get("joules_per_token"))
    for gpu, joules in (energy.get("per_gpu") or {}).items():
        f.add(
            "gpu_energy_joules", "GPU energy used since the run started, per GPU", joules, gpu=gpu
        )
    ranks = snap.get("ranks") if isinstance(snap.get("ranks"), dict) else None
    if ranks:
        for rank, seconds in (ranks.get("step_time_s") or {}).items():
            f.add("rank_step_time_seconds", "Seconds per step of each rank", seconds, rank=rank)
    elif _num(snap.get("step_time_s")) is not None:
        f.add("rank_step_time_seconds", "Seconds per step of each rank", snap["step_time_s"],
              rank=job.get("clock_rank", 0))  # fmt: skip
    _memory(f, snap)
    counts: dict[str, int] = {}
    for alert in snap.get("alerts") or []:
        if isinstance(alert, dict) and isinstance(alert.get("kind"), str):
            counts[alert["kind"]] = counts.get(alert["kind"], 0) + 1
    f.add("alerts", "Alerts standing now, all kinds", sum(counts.values()))
    for kind, n in sorted(counts.items()):
        f.add("alert", "Alerts standing now, by kind", n, kind=kind)
    return list(f.families.values())


#: snapshot memory row field -> (metric name, help)
MEMORY_METRICS = (
    ("allocated_b", "memory_allocated_bytes", "Bytes the caching allocator has handed out, per rank"),
    ("allocated_peak_b", "memory_allocated_peak_bytes", "Highest allocated bytes, per rank"),
    ("reserved_b", "memory_reserved_bytes", "Bytes the caching allocator holds on the card, per rank"),
    ("reserved_peak_b", "memory_reserved_peak_bytes", "Highest reserved bytes, per rank"),
    ("total_b", "memory_total_bytes", "The card's total memory, per rank"),
    ("alloc_retries", "memory_alloc_retries", "Allocations retried after freeing the cache, per rank"),
    ("ooms", "memory_ooms", "Out-of-memory errors the allocator raised, per rank"),
    ("rss_b", "memory_rss_bytes", "Resident memory of the rank's process"),
)


def _memory(f: _Families, snap: dict[str, Any]) -> None:
    """Per rank, from the caching allocator (CUDA, MPS) and the process (RSS)."""
    memory = snap.get("memory") if isinstance(snap.get("memory"), dict) else {}
    for rank, row in (memory.get("ranks") or {}).items():
        if not isinstance(row, dict):
            continue
        for field, name, doc in MEMORY_METRICS:
            f.add(name, doc, row.get(field), rank=rank, device=row.get("device") or "?")


def _waterfall(f: _Families, snap: dict[str, Any]) -> None:
    """The MFU waterfall's factors (docs/waterfall.md), one sample per measured factor.

    The `steps` factors multiply to the MFU under `convention`; the `run` factor (window /
    elapsed) scales the peak to the training window. A factor the waterfall lists as absent has
    no sample (its loss is inside `model_vs_executed`, whose `merged` label names them)."""
    wf = snap.get("waterfall") if isinstance(snap.get("waterfall"), dict) else None
    if not wf:
        return
    convention = wf.get("convention") or "declared"
    for factor in wf.get("factors") or []:
        if not isinstance(factor, dict) or not isinstance(factor.get("name"), str):
            continue
        f.add("mfu_waterfall_factor", "MFU waterfall: the share of the dense peak each factor "
              "keeps (the steps-scope factors multiply to the MFU; above 1 is not clipped)",
              factor.get("value"), factor=factor["name"], scope=factor.get("scope") or "steps",
              convention=convention, merged=",".join(factor.get("merged") or []))  # fmt: skip
    f.add("mfu_waterfall_whole_run_ratio", "window / elapsed x MFU: the model FLOPs of the "
          "whole run as a share of the peak, at the steady rate",
          (wf.get("whole_run") or {}).get("value"), convention=convention)  # fmt: skip


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

    Read-only by construction: the handler answers GET and HEAD of `/metrics` and 404 (or 405
    for other methods); it never touches the run. It stops when the run ends.
    """

    name = "metrics"

    def __init__(self, addr: tuple[str, int], run_dir: Path | None) -> None:
        import prometheus_client  # noqa: F401 - fail here, at start, when it is not installed

        self.fallback_run = run_dir.name if run_dir is not None else None
        self._snap: dict[str, Any] = {}
        self._lock = threading.Lock()
        server_cls = _Server6 if ":" in addr[0] else ThreadingHTTPServer
        self._server = server_cls(addr, _handler(self))
        self._server.daemon_threads = True
        self.address = self._server.server_address[:2]
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="tm-metrics", daemon=True
        )
        self._thread.start()

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


class _Server6(ThreadingHTTPServer):
    address_family = socket.AF_INET6


def _handler(view: MetricsServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "trainmeter"

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            self._answer(with_body=True)

        def do_HEAD(self) -> None:  # noqa: N802
            self._answer(with_body=False)

        def _answer(self, with_body: bool) -> None:
            if self.path.split("?", 1)[0] != "/metrics":
                self._plain(404, b"not found: only /metrics is served here\n", with_body)
                return
            body, ctype = view.body()
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if with_body:
                self.wfile.write(body)

        def _plain(self, code: int, text: bytes, with_body: bool = True) -> None:
            self.send_response(code)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            if with_body:
                self.wfile.write(text)

        def _refuse(self) -> None:
            self._plain(405, b"read-only: GET /metrics\n")

        do_POST = do_PUT = do_DELETE = do_PATCH = _refuse  # noqa: N815

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            return  # a scraper every second must not write to the user's terminal

    return Handler
