"""Alerts: things a person should look at now, each with what it was measured from.

Pure and deterministic given the records and `now` (only the stuck-run check uses `now`), so a
replay raises the same alerts as the live run. Each alert is a dict {kind, key, message, t,
...the numbers it was measured from}. The message holds no measured number (those are in
fields), so the same condition keeps the same message from one snapshot to the next; `key`
names the subject (kind and GPU, rank or disk) for a caller that tells a new alert from one it
already logged. The thresholds:

- data starvation: the loader's wait is over DATA_SHARE of rank 0's last DATA_WINDOW_S of
  training (at least DATA_MIN_SPAN_S of it seen);
- GPU throttling: the latest sample of a GPU lists a thermal or power throttle reason;
- a rank (or a node) the others wait for: named by the straggler rule of engine/stragglers.py
  (its compute per step over the others' by a share of the step time, blocks in a row), for as
  long as it stays named; per-rank step times alone never raise it (in a synchronous job they
  are all the same, and a loaded machine moves one of them for a while);
- disk filling: free bytes fell over the last DISK_TREND_S (at least DISK_MIN_SPAN_S of it) at
  a rate that empties the disk within DISK_HORIZON_S;
- a stuck run: not finished and no step record for STUCK_FACTOR times the usual interval
  between them (and at least STUCK_MIN_S);
- MFU impossible: MFU above 100%, or above a comparable OFU by MFU_OVER_OFU: the peak or the
  FLOPs per token is wrong.
"""

from __future__ import annotations

from collections import deque
from itertools import islice
from operator import itemgetter
from typing import Any

from .formulas import by_gpu

DATA_SHARE = 0.25
DATA_WINDOW_S = 60.0
DATA_MIN_SPAN_S = 5.0
DISK_HORIZON_S = 3600.0
DISK_MIN_SPAN_S = 60.0
STUCK_FACTOR = 10.0
STUCK_MIN_S = 60.0
MFU_OVER_OFU = 0.05
THROTTLE_WORDS = ("thermal", "power")
_TIME = itemgetter(0)


class DataWindow:
    """Rank 0's cumulative data-wait seconds at each step record, over a trailing window.

    The rule: after each point is added, the oldest is dropped while the second oldest is at
    least `DATA_WINDOW_S` older than the new one (two always stay). Only `share` reads the
    window (a snapshot's alert), so a step record only appends its point (`step`, or the
    engine's feed appending to `points` itself and calling `trim` once `limit` are held), and
    the rule is applied to the points added since the last trim when read or when `limit`
    is reached: the same points as after each one (tests/engine/test_data_window.py), without
    a queue operation and a comparison per step record of a replay."""

    #: Points added between two trims, at most (memory stays bounded).
    TRIM_EVERY = 256

    def __init__(self) -> None:
        self.points: list[tuple[float, float]] = []
        self.trimmed = 0  # points[:trimmed] are the rule's own; those after wait for `trim`
        self.limit = self.TRIM_EVERY  # `trim` once the list holds this many

    def step(self, t: float, cumulative_data_s: float) -> None:
        points = self.points
        points.append((t, cumulative_data_s))
        if len(points) >= self.limit:
            self.trim()

    def trim(self) -> None:
        """Apply the rule to the points added since the last trim, in their order.

        The rule drops from the front while the second point is old enough for the newest
        point's horizon; when the last point added is the latest of those added (a log in
        order), the horizons before it were earlier, so what they dropped is a prefix of what
        its horizon drops, and one pass with it gives the same points. Else each added point's
        horizon is applied in turn, as the rule does."""
        points = self.points
        n, start = len(points), self.trimmed
        front = 0
        if start < n:
            newest = points[-1][0]
            if max(map(_TIME, islice(points, start, None))) <= newest:
                horizon = newest - DATA_WINDOW_S
                while n - front > 2 and points[front + 1][0] <= horizon:
                    front += 1
            else:
                for j in range(start, n):
                    horizon = points[j][0] - DATA_WINDOW_S
                    while j + 1 - front > 2 and points[front + 1][0] <= horizon:
                        front += 1
            if front:
                del points[:front]
        self.trimmed = len(points)
        self.limit = self.trimmed + self.TRIM_EVERY

    def share(self) -> tuple[float, float, float] | None:
        """(share of the window spent waiting for data, window seconds, window end t)."""
        if len(self.points) > self.trimmed:
            self.trim()
        if len(self.points) < 2:
            return None
        (t0, c0), (t1, c1) = self.points[0], self.points[-1]
        span = t1 - t0
        if span < DATA_MIN_SPAN_S:
            return None
        return max(c1 - c0, 0.0) / span, span, t1


def data_starvation(window: DataWindow) -> dict[str, Any] | None:
    got = window.share()
    if got is None or got[0] <= DATA_SHARE:
        return None
    share, span, t = got
    return {
        "kind": "data_starvation",
        "key": "data_starvation",
        "message": (
            f"the training loop waits for data over {DATA_SHARE:.0%} of the time: the data "
            "loader is the bottleneck (more workers, pin_memory, prefetch)"
        ),
        "t": t,
        "data_share": share,
        "window_s": span,
    }


def throttling(throttle: dict[str, tuple[list[str], float]]) -> list[dict[str, Any]]:
    out = []
    for gpu, (reasons, t) in sorted(throttle.items(), key=by_gpu):
        hot = [r for r in reasons if any(w in r.lower() for w in THROTTLE_WORDS)]
        if hot:
            out.append(
                {
                    "kind": "gpu_throttle",
                    "key": f"gpu_throttle:{gpu}",
                    "message": f"GPU {gpu} is throttled ({', '.join(sorted(hot))}): clocks are held down",
                    "t": t,
                    "gpu": gpu,
                    "reasons": hot,
                }
            )
    return out


def straggler(named: dict[str, Any] | None, t: float | None) -> dict[str, Any] | None:
    """The straggler the engine names now (`snap["straggler"]`), as an alert."""
    if not named:
        return None
    kind = named.get("kind", "rank")
    who = named.get(kind)
    subject = f"node {who} (ranks {', '.join(str(r) for r in named.get('ranks') or [])})" if (
        kind == "node") else f"rank {who}"
    return {
        "kind": "straggler",
        "key": f"straggler:{kind}:{who}",
        "message": (
            f"{subject} computes longer per step than the other ranks, which wait for it every "
            "step: the job runs at its pace"
        ),
        "t": t,
        kind: who,
        "extra_s": named.get("extra_s"),
        "extra_share": named.get("extra_share"),
        "since_step": named.get("since_step"),
    }


def disk_filling(trend: deque[tuple[float, float]], path: Any) -> dict[str, Any] | None:
    if len(trend) < 2:
        return None
    (t0, free0), (t1, free1) = trend[0], trend[-1]
    span = t1 - t0
    if span < DISK_MIN_SPAN_S or free1 >= free0:
        return None
    rate = (free0 - free1) / span
    full_in = free1 / rate
    if full_in > DISK_HORIZON_S:
        return None
    return {
        "kind": "disk_filling",
        "key": f"disk_filling:{path}",
        "message": (
            f"disk {path} is filling: at the rate of the last minutes it is full within "
            f"{DISK_HORIZON_S / 3600:g} h"
        ),
        "t": t1,
        "path": path,
        "free_b": free1,
        "fill_rate_b_s": rate,
        "full_in_s": full_in,
    }


def stuck(
    now: float | None, finished: bool, last_step_t: float | None, interval_s: float | None
) -> dict[str, Any] | None:
    if now is None or finished or last_step_t is None or not interval_s:
        return None
    limit = max(STUCK_FACTOR * interval_s, STUCK_MIN_S)
    silent = now - last_step_t
    if silent <= limit:
        return None
    return {
        "kind": "stuck",
        "key": "stuck",
        "message": (
            f"no optimizer step for over {STUCK_FACTOR:g} times the usual interval: the run may "
            "be hung (a collective waiting, a dead loader worker)"
        ),
        "t": now,
        "since_last_step_s": silent,
        "usual_interval_s": interval_s,
    }


def mfu_impossible(
    mfu: dict[str, Any], ofu: float | None, comparable: bool, t: float | None
) -> dict[str, Any] | None:
    value = mfu.get("value")
    if value is None:
        return None
    base = {"kind": "mfu_impossible", "key": "mfu_impossible", "t": t, "mfu": value}
    if value > 1.0:
        return {
            **base,
            "message": (
                f"MFU is above 100%: the peak ({mfu.get('peak')}) or the FLOPs per token "
                f"({mfu.get('convention')}) is wrong"
            ),
        }
    if ofu is not None and comparable and value > ofu + MFU_OVER_OFU:
        return {
            **base,
            "ofu": ofu,
            "message": (
                "MFU is above what the tensor cores did (OFU): the peak or the FLOPs per token "
                "is wrong"
            ),
        }
    return None


def collect(
    *,
    data_window: DataWindow | None,
    throttle: dict[str, tuple[list[str], float]],
    straggler_named: dict[str, Any] | None,
    last_step_t: float | None,
    disk_trend: deque[tuple[float, float]],
    disk_path: Any,
    now: float | None,
    finished: bool,
    step_interval_s: float | None,
    mfu: dict[str, Any] | None,
    ofu: dict[str, Any] | None,
) -> list[dict[str, Any]]:
    """Every alert that holds now. `data_window` is None when no data-loader probe measures."""
    out: list[dict[str, Any]] = []
    if data_window is not None:
        out.append(data_starvation(data_window))  # type: ignore[arg-type]
    out.extend(throttling(throttle))
    out.append(straggler(straggler_named, last_step_t))  # type: ignore[arg-type]
    out.append(disk_filling(disk_trend, disk_path))  # type: ignore[arg-type]
    out.append(stuck(now, finished, last_step_t, step_interval_s))  # type: ignore[arg-type]
    ofu = ofu or {}
    out.append(
        mfu_impossible(  # type: ignore[arg-type]
            mfu or {}, ofu.get("value"), bool(ofu.get("comparable_with_mfu", True)), last_step_t
        )
    )
    return [alert for alert in out if alert is not None]
