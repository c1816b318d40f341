"""`tm compare A B [--json]`: two runs side by side, and the biggest differences in words;
`tm compare A B ... --web`: several in the browser (the runs page, `cli/web_runs.py`).

Both runs are replayed from their logs; the comparison itself is `views.compare.compare`.
"""

from __future__ import annotations

import json

from .runarg import CommandError, loaded_run, run_command, split_args

USAGE = """\
usage: tm compare A B [--json]
       tm compare A B [C ...] --web [--port N]
  A, B      runs: a directory, a name or unique prefix under .trainmeter/runs, or latest
  --json    print the comparison as JSON
  --web     the runs side by side in the browser: their curves overlaid (loss, tokens/s, MFU,
            memory) by step, tokens or time, their settings and numbers in one table, the
            differences highlighted (on 127.0.0.1 until Ctrl-C)
  --port N  the first port to try for --web (default 8765; 0 takes any free port)
"""

_SECTIONS = {
    "throughput": "Throughput",
    "mfu": "MFU (one convention for both)",
    "time": "Time",
    "time_per_step": "Time per step (the training loop)",
    "ladder": "Utilization ladder (mean over GPUs)",
}


def cell(value: float | None, unit: str, not_measured: str | None = None) -> str:
    """A value by the one rule every view follows; a part nobody timed reads "not measured"."""
    from ..views.format import amount, duration, si

    if not_measured:
        return "not measured"
    if value is None:
        return "-"
    if unit == "s/step":
        return duration(value)
    if unit in ("steps", "tokens/s"):
        return si(value)
    return amount(value, unit)


def render(result: dict) -> str:
    from ..views.format import amount

    a, b = result["a"]["name"], result["b"]["name"]
    rows = [r for r in result["rows"] if r["a"] is not None or r["b"] is not None
            or r.get("a_not_measured") or r.get("b_not_measured")]
    width = max([len(r["label"]) for r in rows] + [10]) + 2
    col = max(len(a), len(b), 12) + 5
    lines = [f"{'':<{width}}{'A: ' + a:>{col}}{'B: ' + b:>{col}}{'B/A':>8}"]
    section = None
    for row in rows:
        if row["section"] != section:
            section = row["section"]
            lines.append(_SECTIONS.get(section, section))
        ratio = amount(row["ratio"], "factor") if row["ratio"] is not None else ""
        lines.append(
            f"  {row['label']:<{width - 2}}"
            f"{cell(row['a'], row['unit'], row.get('a_not_measured')):>{col}}"
            f"{cell(row['b'], row['unit'], row.get('b_not_measured')):>{col}}{ratio:>8}"
        )
    lines.append("")
    if result["differences"]:
        lines += [f"- {d}" for d in result["differences"]]
    else:
        lines.append("- no difference large enough to name")
    return "\n".join(lines)


def _main(argv: list[str]) -> int:
    if "-h" in argv or "--help" in argv:
        print(USAGE, end="")
        return 0
    runs, opts = split_args("compare", argv, {"--json", "--web"}, {"--port"}, max_runs=len(argv))
    if opts.get("--web"):
        return _web(runs, opts)
    if "--port" in opts:
        raise CommandError("--port goes with --web")
    if len(runs) != 2:
        raise CommandError("name two runs to compare: tm compare A B (several: --web)")
    dir_a, snap_a = loaded_run(runs[0])
    dir_b, snap_b = loaded_run(runs[1])
    if dir_a == dir_b:
        raise CommandError(f"{runs[0]!r} and {runs[1]!r} are the same run ({dir_a.name})")
    from ..runlog.runs import run_name
    from ..views.compare import compare

    names = (run_name(dir_a), run_name(dir_b))
    if names[0] == names[1]:
        names = (dir_a.name, dir_b.name)
    result = compare(snap_a, snap_b, *names)
    if opts.get("--json"):
        print(json.dumps(result, indent=2, allow_nan=False), flush=True)
    else:
        print(render(result), flush=True)
    return 0


def _web(specs: list[str], opts: dict) -> int:
    """The runs side by side in the browser: the runs page's comparison of these runs."""
    from ..runlog.runs import RunNotFound, resolve_run
    from ..views.web.runs_site import compare_path
    from .web_runs import parse_port, serve

    if len(specs) < 2:
        raise CommandError("name two runs or more to compare: tm compare A B --web")
    port = parse_port(opts.get("--port"))
    try:
        dirs = [resolve_run(spec) for spec in specs]
    except RunNotFound as exc:
        raise CommandError(str(exc)) from None
    if len(set(dirs)) < len(dirs):
        raise CommandError("the same run is named twice")
    names = [d.name for d in dirs]
    alike = next((n for n in names if names.count(n) > 1), None)
    if alike is not None:  # the page names a run by its directory's name: one would show twice
        raise CommandError(f"two runs have the directory name {alike!r}: the page cannot tell "
                           "them apart (rename one, or compare them without --web)")
    return serve("compare", dirs, port, compare_path(names))


def main(argv: list[str]) -> int:
    return run_command("compare", _main, argv)
