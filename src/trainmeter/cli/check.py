"""`tm check RUN [thresholds]`: a guard for CI and scheduled jobs.

A run's own `tm` always returns the training command's status, so failing a job because the run
got slower needs a command of its own. Each threshold is one line (held or not, with both
numbers); exit 0 when every threshold holds, 1 when any fails, 2 on bad usage. A number the run
does not have fails its threshold with the reason it is absent: a guard that passes because it
could not measure would guard nothing.

Against a baseline, the runs' steady-state rates are compared with a noise band from their own
per-step times (engine/noise.py): two runs of one program on a busy machine differ by a few
percent, and a guard that failed on that would be switched off. `tm check RUN --baseline RUN`
holds when the run has a number to compare; when neither run has any, nothing was compared, and
that fails.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from ..readable import duration, percent, si
from ..snapread import get
from .args import UsageError, parse_amount, parse_fraction

USAGE = """\
usage: tm check RUN [thresholds] [--json]
  RUN                      a run directory, or a name or prefix under .trainmeter/runs, or latest
  --min-mfu F              MFU at least F (35% or 0.35), under the run's convention
  --min-tokens-per-s N     tokens/s at least N (SI suffixes: 1.2M)
  --max-data-wait F        data wait at most F of the training time (compute + data wait)
  --max-step-time S        step time at most S seconds
  --baseline RUN2 --max-drop F
                           tokens/s, step time and MFU (same convention) no more than F worse
                           than RUN2's beyond the noise band of their per-step times; a number
                           absent from both is not compared, absent from one fails, and
                           nothing compared at all fails
  --json                   one JSON object instead of lines
exit status: 0 all thresholds hold, 1 one or more fail, 2 bad usage
"""

_FLAGS = {
    "--min-mfu": parse_fraction,
    "--min-tokens-per-s": parse_amount,
    "--max-data-wait": parse_fraction,
    "--max-step-time": parse_amount,
    "--max-drop": parse_fraction,
    "--baseline": lambda flag, text: text,
}


# Numbers read as in every view (readable.py): 2.5B tokens/s, 38.1%, 83.9 ms.
_si, _pct, _seconds = si, percent, duration


def mfu_of(snap: dict[str, Any]) -> tuple[float, str] | str:
    """(MFU, convention), or why it is absent."""
    mfu = snap.get("mfu") or {}
    absent = snap.get("absent") or {}
    if isinstance(mfu.get("value"), (int, float)):
        return float(mfu["value"]), str(mfu.get("convention"))
    if mfu.get("range"):
        return "MFU is a range over conventions: run with --convention to check it"
    samples = get(snap, "samples.mfu") or {}
    if isinstance(samples.get("value"), (int, float)):
        return float(samples["value"]), "counted"
    return absent.get("mfu", "not measured")


def data_wait_of(snap: dict[str, Any]) -> float | str:
    """Data wait as a share of the training time (compute + data wait), or why it is absent."""
    parts = {p.get("name"): p for p in get(snap, "time.parts") or []}
    data, compute = parts.get("data") or {}, parts.get("compute") or {}
    if not parts:
        absent = snap.get("absent") or {}
        return absent.get("time_split") or absent.get("time") or "no time split"
    if not data.get("measured"):
        # the engine says why (probe not attached, or no DataLoader iterated)
        return (snap.get("absent") or {}).get("time.data") or "the data wait was not measured"
    wait, busy = data.get("s") or 0.0, compute.get("s") or 0.0
    if wait + busy <= 0:
        return "no training time yet"
    return wait / (wait + busy)


def _number(snap: dict[str, Any], key: str) -> float | str:
    value = snap.get(key)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return (snap.get("absent") or {}).get(key, "not measured")


def _mfu_value(snap: dict[str, Any]) -> float | str:
    got = mfu_of(snap)
    return got if isinstance(got, str) else got[0]


def _line(name: str, value: Any, threshold: Any, held: bool, text: str) -> dict[str, Any]:
    return {"name": name, "value": value, "threshold": threshold, "held": held, "text": text}


def _absent(name: str, threshold: Any, shown: str, reason: str) -> dict[str, Any]:
    return _line(name, None, threshold, False, f"{name} absent ({reason}); needed {shown}")


#: Every threshold, one row each: flag, name, the number read from a snapshot (or why it is
#: absent), whether higher is better, how a value and the limit are shown.
LIMITS: tuple[tuple[str, str, Any, bool, Any, Any], ...] = (
    ("--min-mfu", "MFU", _mfu_value, True, _pct, _pct),
    ("--min-tokens-per-s", "tokens/s", lambda s: _number(s, "tokens_per_s"), True, _si, _si),
    ("--max-data-wait", "data wait", data_wait_of, False, _pct, _pct),
    ("--max-step-time", "step time", lambda s: _number(s, "step_time_s"), False, _seconds,
     _seconds),
)

#: Against a baseline (`--max-drop`): name, snapshot key (or MFU), whether higher is better,
#: how a value is shown, and the quantity whose block bootstrap gives the noise band.
AGAINST: tuple[tuple[str, str, bool, Any, str], ...] = (
    ("tokens/s", "tokens_per_s", True, _si, "tokens_per_s"),
    ("step time", "step_time_s", False, _seconds, "step_time_s"),
    ("MFU", "mfu", True, _pct, "tokens_per_s"),
)


def checks(
    snap: dict[str, Any], limits: dict[str, Any], base: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """One result per threshold, in the order of the usage text."""
    out: list[dict[str, Any]] = []
    for flag, name, read, higher, fmt, fmt_limit in LIMITS:
        if flag not in limits:
            continue
        lim = limits[flag]
        sign = ">=" if higher else "<="
        got = read(snap)
        if isinstance(got, str):
            out.append(_absent(name, lim, f"{sign} {fmt_limit(lim)}", got))
            continue
        held = got >= lim if higher else got <= lim
        shown = fmt(got)
        if flag == "--min-mfu":
            shown += f" ({mfu_of(snap)[1]})"
        op = sign if held else ("<" if higher else ">")
        out.append(_line(name, got, lim, held, f"{name} {shown} {op} {fmt_limit(lim)}"))
    if base is not None:
        against = _against(snap, base, limits["--max-drop"])
        out.extend(against)
        if all(r.get("compared") is False for r in against):
            # every number absent from both runs: a guard that compared nothing guards nothing
            out.append(_line(
                "baseline", None, limits["--max-drop"], False,
                "nothing compared with the baseline: neither run has tokens/s, step time or MFU",
            ) | {"compared": False})
    return out


def _short(x: float) -> str:
    """A change as a percentage, by the one rule: 23.0%, 4.2%, 0.31%."""
    return percent(abs(x))


def _against(snap: dict[str, Any], base: dict[str, Any], drop: float) -> list[dict[str, Any]]:
    """tokens/s, step time and MFU against the baseline, each with its noise band.

    A number both runs have is compared: it fails when it is worse than `drop` even at the
    favourable end of the noise band. A number absent from both is not compared (and holds); a
    number absent from one fails, saying which and why."""
    from ..engine import noise

    out = []
    allowed = f"{percent(drop)} allowed"
    run_blocks, base_blocks = noise.blocks_of(snap), noise.blocks_of(base)
    for name, key, higher, fmt, quantity in AGAINST:
        label = f"{name} vs baseline"
        if key == "mfu":
            got_mfu, ref_mfu = mfu_of(snap), mfu_of(base)
            got = got_mfu if isinstance(got_mfu, str) else got_mfu[0]
            ref = ref_mfu if isinstance(ref_mfu, str) else ref_mfu[0]
            conv = ref_mfu[1] if isinstance(got_mfu, str) else got_mfu[1]
            fmt = lambda v, c=conv: f"{_pct(v)} ({c})"  # noqa: E731
            if not isinstance(got_mfu, str) and not isinstance(ref_mfu, str):
                if got_mfu[1] != ref_mfu[1]:
                    out.append(_absent(label, drop, f"at most {allowed}",
                                       f"conventions differ: {got_mfu[1]} vs baseline "
                                       f"{ref_mfu[1]}"))
                    continue
        else:
            got, ref = _steady(snap, key, run_blocks), _steady(base, key, base_blocks)
        if isinstance(got, str) and isinstance(ref, str):
            why = got if got == ref else f"run: {got}; baseline: {ref}"
            text = f"{label}: not compared, absent from both ({why})"
            out.append(_line(label, None, drop, True, text) | {"compared": False})
            continue
        if isinstance(got, str) or isinstance(ref, str):
            which, why, other = (
                ("run", got, f"the baseline has {fmt(ref)}")
                if isinstance(got, str)
                else ("baseline", ref, f"the run has {fmt(got)}")
            )
            text = f"{label}: absent from the {which} ({why}); {other}"
            out.append(_line(label, None, drop, False, text))
            continue
        out.append(_compared(label, got, ref, higher, fmt, drop, quantity,
                             run_blocks, base_blocks))
    return out


def _steady(snap: dict[str, Any], key: str, blocks: list[list[float]] | None) -> float | str:
    """The steady-state value of a rate: from the steady window's blocks (equal to the snapshot's
    number once the run has ended; a run still going shows its trailing window instead)."""
    from ..engine import noise

    got = _number(snap, key)
    if isinstance(got, str) or not blocks:
        return got
    steady = noise.value_of(blocks, key)
    return got if steady is None else steady


def _compared(
    label: str,
    got: float,
    ref: float,
    higher: bool,
    fmt: Any,
    drop: float,
    quantity: str,
    run_blocks: list[list[float]] | None,
    base_blocks: list[list[float]] | None,
) -> dict[str, Any]:
    from ..engine import noise

    allowed = f"{percent(drop)} allowed"
    band = None
    if run_blocks and base_blocks:
        band = noise.compare(base_blocks, run_blocks, quantity)
    change = got / ref - 1.0
    if band is not None:
        # the band is relative; centre it on this number's own change
        half = band.noise
        low, high = change - half, change + half
        note = f"noise ±{_short(half)}"
    else:
        low = high = change
        note = "no per-step times: no noise band"
    worse, worse_fav = (-change, -high) if higher else (change, low)
    held = worse_fav <= drop
    head = f"{label.split(' vs ')[0]} {fmt(got)} vs baseline {fmt(ref)}"
    if not held:
        text = f"{head}: regressed by {_short(worse)} ({note}), more than the {allowed}"
    elif band is not None and low <= 0.0 <= high:
        text = f"{head}: within noise ({_short(change)} {_word(change, higher)}, {note})"
    elif worse > drop:
        text = (
            f"{head}: {_short(change)} {_word(change, higher)}, within noise of the "
            f"{allowed} ({note})"
        )
    else:
        text = f"{head}: {_short(change)} {_word(change, higher)} ({note}), {allowed}"
    entry = _line(label, got, drop, held, text) | {"baseline": ref, "change": change}
    if band is not None:
        entry["noise"] = band.noise
    return entry


def _word(change: float, higher: bool) -> str:
    if change == 0:
        return "change"
    if higher:
        return "higher" if change > 0 else "lower"
    return "longer" if change > 0 else "shorter"


def parse(argv: list[str]) -> tuple[str | None, dict[str, Any], bool]:
    spec: str | None = None
    limits: dict[str, Any] = {}
    as_json = False
    it = iter(argv)
    for arg in it:
        flag, eq, inline = arg.partition("=")
        if arg == "--json":
            as_json = True
        elif flag in _FLAGS:
            value = inline if eq else next(it, None)
            if value is None:
                raise UsageError(f"{flag} needs a value")
            limits[flag] = _FLAGS[flag](flag, value)
        elif arg.startswith("-"):
            raise UsageError(f"unknown option {arg!r}")
        elif spec is None:
            spec = arg
        else:
            raise UsageError(f"one run at a time ({spec!r} and {arg!r})")
    if ("--baseline" in limits) != ("--max-drop" in limits):
        raise UsageError("--baseline and --max-drop go together")
    if not limits:
        raise UsageError("no threshold given: see tm check --help")
    return spec, limits, as_json


def _snapshot(spec: str | None) -> tuple[dict[str, Any], str]:
    from ..runlog.replay import replay
    from ..runlog.runs import resolve_run

    run_dir = resolve_run(None if spec == "latest" else spec)
    return replay(run_dir / "events.jsonl").snapshot, str(run_dir)


def main(argv: list[str]) -> int:
    if any(a in ("-h", "--help") for a in argv):
        print(USAGE, end="")
        return 0
    from ..runlog.runs import RunNotFound

    try:
        spec, limits, as_json = parse(argv)
        snap, run_dir = _snapshot(spec)
        base = base_dir = None
        if "--baseline" in limits:
            base, base_dir = _snapshot(limits["--baseline"])
    except UsageError as exc:
        print(f"tm check: {exc}", file=sys.stderr)
        return 2
    except (RunNotFound, OSError) as exc:
        print(f"tm check: {exc}", file=sys.stderr)
        return 2
    results = checks(snap, limits, base)
    ok = all(r["held"] for r in results)
    if as_json:
        doc = {"ok": ok, "run": run_dir, "baseline": base_dir, "checks": results}
        print(json.dumps(doc, allow_nan=False, indent=2))
    else:
        from ..visible import visible

        for r in results:  # a reason quotes the run's text: shown as characters
            print(f"{'ok  ' if r['held'] else 'FAIL'}  {visible(r['text'], newlines=False)}")
        print(f"tm check: {sum(not r['held'] for r in results)} of {len(results)} failed"
              if not ok else f"tm check: all {len(results)} held")
    return 0 if ok else 1
