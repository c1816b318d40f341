"""`tm check RUN [thresholds]`: a guard for CI and scheduled jobs.

A run's own `tm` always returns the training command's status, so failing a job because the run
got slower needs a command of its own. Each threshold is one line (held or not, with both
numbers); exit 0 when every threshold holds, 1 when any fails, 2 on bad usage. A number the run
does not have fails its threshold with the reason it is absent: a guard that passes because it
could not measure would guard nothing.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from .args import UsageError, parse_amount, parse_fraction

USAGE = """\
usage: tm check RUN [thresholds] [--json]
  RUN                      a run directory, or a name or prefix under .trainmeter/runs, or latest
  --min-mfu F              MFU at least F (35% or 0.35), under the run's convention
  --min-tokens-per-s N     tokens/s at least N (SI suffixes: 1.2M)
  --max-data-wait F        data wait at most F of the training time (compute + data wait)
  --max-step-time S        step time at most S seconds
  --baseline RUN2 --max-drop F
                           tokens/s, MFU (same convention) and step time no more than F worse
                           than RUN2's
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


def _si(x: float) -> str:
    for div, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g}{suffix}"
    return f"{x:.3g}"


def _pct(x: float) -> str:
    """A share as a percentage; a tiny one keeps two significant digits (0.00028%, not 0.0%)."""
    return f"{x * 100:.2g}%" if x and abs(x) < 0.001 else f"{x:.1%}"


def mfu_of(snap: dict[str, Any]) -> tuple[float, str] | str:
    """(MFU, convention), or why it is absent."""
    mfu = snap.get("mfu") or {}
    absent = snap.get("absent") or {}
    if isinstance(mfu.get("value"), (int, float)):
        return float(mfu["value"]), str(mfu.get("convention"))
    if mfu.get("range"):
        return "MFU is a range over conventions: run with --convention to check it"
    samples = (snap.get("samples") or {}).get("mfu") or {}
    if isinstance(samples.get("value"), (int, float)):
        return float(samples["value"]), "counted"
    return absent.get("mfu", "not measured")


def data_wait_of(snap: dict[str, Any]) -> float | str:
    """Data wait as a share of the training time (compute + data wait), or why it is absent."""
    parts = {p.get("name"): p for p in (snap.get("time") or {}).get("parts") or []}
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


def _line(name: str, value: Any, threshold: Any, held: bool, text: str) -> dict[str, Any]:
    return {"name": name, "value": value, "threshold": threshold, "held": held, "text": text}


def _absent(name: str, threshold: Any, shown: str, reason: str) -> dict[str, Any]:
    return _line(name, None, threshold, False, f"{name} absent ({reason}); needed {shown}")


def checks(
    snap: dict[str, Any], limits: dict[str, Any], base: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """One result per threshold, in the order of the usage text."""
    out: list[dict[str, Any]] = []
    if "--min-mfu" in limits:
        lim = limits["--min-mfu"]
        got = mfu_of(snap)
        if isinstance(got, str):
            out.append(_absent("MFU", lim, f">= {lim:.1%}", got))
        else:
            held = got[0] >= lim
            out.append(_line("MFU", got[0], lim, held,
                             f"MFU {_pct(got[0])} ({got[1]}) {'>=' if held else '<'} {lim:.1%}"))
    if "--min-tokens-per-s" in limits:
        lim = limits["--min-tokens-per-s"]
        got = _number(snap, "tokens_per_s")
        if isinstance(got, str):
            out.append(_absent("tokens/s", lim, f">= {_si(lim)}", got))
        else:
            held = got >= lim
            out.append(_line("tokens/s", got, lim, held,
                             f"tokens/s {_si(got)} {'>=' if held else '<'} {_si(lim)}"))
    if "--max-data-wait" in limits:
        lim = limits["--max-data-wait"]
        got = data_wait_of(snap)
        if isinstance(got, str):
            out.append(_absent("data wait", lim, f"<= {lim:.1%}", got))
        else:
            held = got <= lim
            out.append(_line("data wait", got, lim, held,
                             f"data wait {got:.1%} {'<=' if held else '>'} {lim:.1%}"))
    if "--max-step-time" in limits:
        lim = limits["--max-step-time"]
        got = _number(snap, "step_time_s")
        if isinstance(got, str):
            out.append(_absent("step time", lim, f"<= {lim:g} s", got))
        else:
            held = got <= lim
            out.append(_line("step time", got, lim, held,
                             f"step time {got:.4g} s {'<=' if held else '>'} {lim:g} s"))
    if base is not None:
        out.extend(_against(snap, base, limits["--max-drop"]))
    return out


def _against(snap: dict[str, Any], base: dict[str, Any], drop: float) -> list[dict[str, Any]]:
    """tokens/s, MFU and step time against the baseline: each may be at most `drop` worse."""
    out = []
    allowed = f"{drop:.1%} allowed"
    for name, key, higher_is_better, fmt in (
        ("tokens/s", "tokens_per_s", True, _si),
        ("step time", "step_time_s", False, lambda v: f"{v:.4g} s"),
    ):
        got, ref = _number(snap, key), _number(base, key)
        if isinstance(got, str) or isinstance(ref, str):
            why = f"run: {got}" if isinstance(got, str) else f"baseline: {ref}"
            out.append(_absent(f"{name} vs baseline", drop, f"at most {allowed}", why))
            continue
        worse = (1 - got / ref) if higher_is_better else (got / ref - 1)
        held = worse <= drop
        word = "drop" if higher_is_better else "rise"
        text = (
            f"{name} {fmt(got)} vs baseline {fmt(ref)}: {max(worse, 0):.1%} {word} "
            f"{'<=' if held else '>'} {allowed}"
        )
        out.append(_line(f"{name} vs baseline", got, drop, held, text) | {"baseline": ref})
    got, ref = mfu_of(snap), mfu_of(base)
    if isinstance(got, str) or isinstance(ref, str):
        why = f"run: {got}" if isinstance(got, str) else f"baseline: {ref}"
        out.append(_absent("MFU vs baseline", drop, f"at most {allowed}", why))
    elif got[1] != ref[1]:
        out.append(_absent("MFU vs baseline", drop, f"at most {allowed}",
                           f"conventions differ: {got[1]} vs baseline {ref[1]}"))
    else:
        worse = 1 - got[0] / ref[0]
        held = worse <= drop
        text = (
            f"MFU {_pct(got[0])} vs baseline {_pct(ref[0])} ({got[1]}): {max(worse, 0):.1%} drop "
            f"{'<=' if held else '>'} {allowed}"
        )
        out.append(_line("MFU vs baseline", got[0], drop, held, text) | {"baseline": ref[0]})
    return out


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
        for r in results:
            print(f"{'ok  ' if r['held'] else 'FAIL'}  {r['text']}")
        print(f"tm check: {sum(not r['held'] for r in results)} of {len(results)} failed"
              if not ok else f"tm check: all {len(results)} held")
    return 0 if ok else 1
