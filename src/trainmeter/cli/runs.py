"""`tm runs [--json]`: the runs under .trainmeter/runs, oldest first, one line each."""

from __future__ import annotations

import json
from typing import Any

from ..snapread import get, get_dict
from ..visible import visible
from .runarg import CommandError, run_command, split_args

USAGE = """\
usage: tm runs [--json] [--web [--port N]]
  the runs under .trainmeter/runs: name, start, duration, status, steps, tokens, tokens/s, MFU
  --json    the same as a list of objects
  --web     the runs page in the browser: every run with its status, cause of death and headline
            numbers; filter, sort, open one, compare several (on 127.0.0.1 until Ctrl-C)
  --port N  the first port to try for --web (default 8765; 0 takes any free port)
"""

HEADER = ("RUN", "START (UTC)", "DURATION", "STATUS", "STEPS", "TOKENS", "TOKENS/S", "MFU")


def _duration(seconds: float | None) -> str:
    from ..views.format import duration

    return "-" if seconds is None else duration(seconds)


def _count(value: float | None) -> str:
    from ..views.format import si

    return "-" if value is None else si(value)


def _mfu(value: float | None, convention: str | None) -> str:
    from ..views.format import percent

    if value is None:
        return "-"
    text = percent(value)
    return f"{text} {convention}" if convention else text


def mfu_range(snap: dict) -> list[float] | None:
    """[low, high] over the FLOPs conventions when none was chosen, else None."""
    span = get(snap, "mfu.range")
    if isinstance(span, list) and len(span) == 2 and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in span
    ):
        return [float(span[0]), float(span[1])]
    return None


def counted_utilization(snap: dict) -> float | None:
    counted = get_dict(snap, "counted") or {}
    value = counted.get("utilization")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _mfu_cell(info: Any) -> str:
    """The MFU under the run's convention; with none chosen, the range over the conventions."""
    if info.mfu is None:
        span = mfu_range(info.snapshot or {})
        if span is not None:
            return f"{_mfu(span[0], None)}–{_mfu(span[1], None)} range"
    return _mfu(info.mfu, info.mfu_convention)


def rows(infos: list) -> list[tuple[str, ...]]:
    return [
        (
            visible(info.path.name, newlines=False),
            (info.start_utc or "-")[:19].replace("T", " "),
            _duration(info.duration_s),
            visible(info.status, newlines=False),  # a crash's words: characters, not commands
            _count(info.steps),
            _count(info.tokens),
            _count(info.tokens_per_s),
            _mfu_cell(info),
        )
        for info in infos
    ]


def table(lines: list[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in lines) for i in range(len(lines[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in lines)


def _main(argv: list[str]) -> int:
    if "-h" in argv or "--help" in argv:
        print(USAGE, end="")
        return 0
    _runs, opts = split_args("runs", argv, {"--json", "--web"}, {"--port"}, max_runs=0)
    from ..runlog.runs import list_runs, runs_root

    if opts.get("--web"):
        from .web_runs import parse_port, serve

        return serve("runs", [], parse_port(opts.get("--port")))
    if "--port" in opts:
        raise CommandError("--port goes with --web")

    infos = list_runs()
    if opts.get("--json"):
        out = [
            {"dir": i.path.name, "name": i.name, "start_utc": i.start_utc,
             "duration_s": i.duration_s, "status": i.status, "steps": i.steps, "tokens": i.tokens,
             "tokens_per_s": i.tokens_per_s, "mfu": i.mfu, "mfu_convention": i.mfu_convention,
             "mfu_range": mfu_range(i.snapshot or {}),
             "counted_utilization": counted_utilization(i.snapshot or {})}
            for i in infos
        ]
        print(json.dumps(out, indent=2, allow_nan=False), flush=True)
        return 0
    if not infos:
        print(f"no runs under {runs_root()} yet (tm script.py makes one)")
        return 0
    print(table([HEADER, *rows(infos)]), flush=True)
    return 0


def main(argv: list[str]) -> int:
    return run_command("runs", _main, argv)
