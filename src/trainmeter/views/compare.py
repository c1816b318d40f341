"""Two runs side by side, and their biggest differences said in words.

Pure: two snapshots in, one plain dict out, for `tm compare` and for the dashboard. The sections
are throughput (tokens/s, step time, achieved FLOP/s), MFU under one convention (the first run's,
recomputed for the second from its per-convention values, so both are counted the same way), the
time split (each part of the training loop in seconds per step: runs of different lengths
compare), and the utilization ladder.

Which difference is "biggest": among the loop's parts (data wait, checkpoints, eval, compute), the
one whose seconds per step changed most, measured against the slower run's step time. A part
that moved by less than a tenth of a step is not named. Startup and the tail after the last step
are named only when they moved by more than a second and by more than a quarter.
"""

from __future__ import annotations

from typing import Any

from ..snapread import finite_value as _num
from .format import duration, mantissa
from .format import percent as _pct

LOOP_PARTS = ("data", "checkpoint", "eval", "compute")
#: A loop part is named when its seconds per step moved by this share of the slower step time.
NAMED_SHARE = 0.10
#: Throughput differences under this ratio are "about the same".
SAME_RATIO = 1.10
LADDER_RUNGS = ("gpu_util", "sm_active", "tensor_active", "ofu", "mfu")


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or a == 0:
        return None
    return b / a


def _row(section: str, key: str, label: str, unit: str, a: Any, b: Any) -> dict[str, Any]:
    return {"section": section, "key": key, "label": label, "unit": unit, "a": a, "b": b,
            "ratio": _ratio(a, b)}


def _convention(a: dict[str, Any], b: dict[str, Any]) -> str | None:
    """The convention both runs are counted under: the first run's, else the second's."""
    for snap in (a, b):
        conv = _dict(snap.get("mfu")).get("convention") or _dict(snap.get("flops_per_token")).get(
            "convention"
        )
        if isinstance(conv, str) and conv in _dict(snap.get("conventions")):
            return conv
        if isinstance(conv, str):
            return conv
    return None


def _fpt(snap: dict[str, Any], conv: str | None) -> float | None:
    if conv is not None:
        per = _num(_dict(snap.get("conventions")).get(conv))
        if per is not None:
            return per
        fpt = _dict(snap.get("flops_per_token"))
        if fpt.get("convention") == conv:
            return _num(fpt)
    return None


def _mfu(snap: dict[str, Any], conv: str | None) -> float | None:
    mfu = _dict(snap.get("mfu"))
    if conv is None:
        return None
    if mfu.get("convention") == conv and _num(mfu) is not None:
        return _num(mfu)
    return _num(_dict(mfu.get("by_convention")).get(conv))


def _parts(snap: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        str(p.get("name")): p
        for p in _dict(snap.get("time")).get("parts") or []
        if isinstance(p, dict) and _num(p.get("s")) is not None
    }


def _untimed(part: dict[str, Any] | None) -> str | None:
    """Why a part reads zero when nobody timed it (no checkpoint was saved), else None: such a
    zero is not measured, and is shown so, never as 0 ms."""
    if part is not None and part.get("reason") and not _num(part.get("s")):
        return str(part["reason"])
    return None


def _per_step(part: dict[str, Any] | None, steps: float | None) -> float | None:
    if part is None or not steps or _untimed(part):
        return None
    return float(part["s"]) / steps


def compare(
    a: dict[str, Any], b: dict[str, Any], a_name: str = "A", b_name: str = "B"
) -> dict[str, Any]:
    """The side-by-side record of two final snapshots, with the differences in words."""
    conv = _convention(a, b)
    rows: list[dict[str, Any]] = []
    tps_a, tps_b = _num(a.get("tokens_per_s")), _num(b.get("tokens_per_s"))
    st_a, st_b = _num(a.get("step_time_s")), _num(b.get("step_time_s"))
    rows.append(_row("throughput", "tokens_per_s", "Tokens/s", "tokens/s", tps_a, tps_b))
    rows.append(_row("throughput", "step_time_s", "Step time", "s", st_a, st_b))
    for key, label in (("median_s", "median"), ("p10_s", "p10"), ("p90_s", "p90")):
        # the step-time distribution of each run's steady window, beside its rate
        qa, qb = (_num(_dict(s.get("step_times")).get(key)) for s in (a, b))
        if qa is not None or qb is not None:
            rows.append(_row("throughput", f"step_time_{key}", f"Step time, {label}", "s", qa, qb))
    fpt_a, fpt_b = _fpt(a, conv), _fpt(b, conv)
    fps_a = tps_a * fpt_a if tps_a is not None and fpt_a is not None else None
    fps_b = tps_b * fpt_b if tps_b is not None and fpt_b is not None else None
    rows.append(_row("throughput", "flops_per_s", f"Model FLOP/s ({conv or 'no convention'})", "FLOP/s", fps_a, fps_b))
    rows.append(_row("throughput", "steps", "Steps", "steps", _num(a.get("steps")),
                     _num(b.get("steps"))))
    rows.append(_row("mfu", "mfu", f"MFU ({conv or 'no convention'})", "fraction", _mfu(a, conv), _mfu(b, conv)))
    wall_a, wall_b = (_num(_dict(s.get("time")).get("elapsed_s")) for s in (a, b))
    rows.append(_row("time", "wall", "Wall time", "s", wall_a, wall_b))
    rows.append(_row("time", "goodput", "Goodput", "fraction",
                     _num(_dict(a.get("time")).get("goodput")),
                     _num(_dict(b.get("time")).get("goodput"))))
    parts_a, parts_b = _parts(a), _parts(b)
    steps_a, steps_b = _num(a.get("steps")), _num(b.get("steps"))
    names = list(dict.fromkeys([*parts_a, *parts_b]))
    names.sort(key=lambda n: n in LOOP_PARTS)  # startup and the tail first, then the loop
    for name in names:
        pa, pb = parts_a.get(name), parts_b.get(name)
        label = str((pa or pb or {}).get("label") or name)
        if name in LOOP_PARTS:
            row = _row("time_per_step", name, label, "s/step",
                       _per_step(pa, steps_a), _per_step(pb, steps_b))
        else:
            row = _row("time", name, label, "s", None if _untimed(pa) else _num((pa or {}).get("s")),
                       None if _untimed(pb) else _num((pb or {}).get("s")))
        for side, part in (("a", pa), ("b", pb)):
            if _untimed(part):
                row[f"{side}_not_measured"] = _untimed(part)
        rows.append(row)
    ladder_a = _dict(_dict(a.get("ladder")).get("mean"))
    ladder_b = _dict(_dict(b.get("ladder")).get("mean"))
    for rung in LADDER_RUNGS:
        if rung == "mfu" and (rung in ladder_a or rung in ladder_b):
            # the top rung under the one convention, like the MFU row above
            rows.append(_row("ladder", rung, rung, "fraction", _mfu(a, conv), _mfu(b, conv)))
        elif rung in ladder_a or rung in ladder_b:
            rows.append(_row("ladder", rung, rung, "fraction", _num(ladder_a.get(rung)),
                             _num(ladder_b.get(rung))))
    differences, biggest = _differences(rows, a_name, b_name, conv)
    return {
        "a": {"name": a_name}, "b": {"name": b_name},
        "convention": conv,
        "rows": rows,
        "differences": differences,
        "biggest": biggest,
    }


def _differences(
    rows: list[dict[str, Any]], a_name: str, b_name: str, conv: str | None
) -> tuple[list[str], dict[str, Any] | None]:
    by_key = {(r["section"], r["key"]): r for r in rows}
    words: list[str] = []
    tps = by_key[("throughput", "tokens_per_s")]
    if tps["ratio"] is not None:
        r = tps["ratio"]
        if r >= SAME_RATIO:
            words.append(f"{b_name} is {mantissa(r)}× as fast as {a_name} in tokens/s")
        elif r <= 1 / SAME_RATIO:
            words.append(f"{b_name} is {mantissa(1 / r)}× slower than {a_name} in tokens/s")
        else:
            words.append(f"{a_name} and {b_name} run at about the same tokens/s")
    step_times = [v for v in (by_key[("throughput", "step_time_s")]["a"],
                              by_key[("throughput", "step_time_s")]["b"]) if v]
    scale = max(step_times) if step_times else None
    moved: list[tuple[float, dict[str, Any]]] = []
    for row in rows:
        if row["section"] != "time_per_step" or row["a"] is None or row["b"] is None or not scale:
            continue
        delta = row["b"] - row["a"]
        if abs(delta) >= NAMED_SHARE * scale:
            moved.append((abs(delta) / scale, row))
    moved.sort(key=lambda item: item[0], reverse=True)
    biggest = None
    for i, (share, row) in enumerate(moved):
        more, less = (b_name, a_name) if row["b"] > row["a"] else (a_name, b_name)
        label = row["label"].lower()
        lead = "the biggest difference is" if i == 0 else "then"
        words.append(
            f"{lead} {label}: {more} spends {duration(max(row['a'], row['b']))} a step on it "
            f"against {duration(min(row['a'], row['b']))} for {less} ({_pct(share)} of the slower step)"
        )
        if i == 0:
            biggest = {"section": row["section"], "key": row["key"], "label": row["label"],
                       "a": row["a"], "b": row["b"], "share_of_step": share}
    for row in rows:
        if row["section"] == "time" and row["key"] in ("startup", "after"):
            if row["a"] is None or row["b"] is None:
                continue
            delta = row["b"] - row["a"]
            if abs(delta) > 1.0 and abs(delta) > 0.25 * max(row["a"], row["b"]):
                more = b_name if delta > 0 else a_name
                words.append(f"{row['label'].lower()} takes {duration(abs(delta))} longer in {more}")
    mfu = by_key[("mfu", "mfu")]
    if mfu["a"] is not None and mfu["b"] is not None and mfu["ratio"] is not None:
        if not 1 / SAME_RATIO < mfu["ratio"] < SAME_RATIO:
            words.append(f"MFU ({conv}): {_pct(mfu['a'])} for {a_name}, {_pct(mfu['b'])} for {b_name}")
    for row in rows:
        if row["section"] == "ladder" and row["a"] is not None and row["b"] is not None:
            if abs(row["b"] - row["a"]) >= 0.1:
                words.append(f"{row['label']}: {_pct(row['a'])} for {a_name}, "
                             f"{_pct(row['b'])} for {b_name}")
    return words, biggest
