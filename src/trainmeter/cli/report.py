"""`tm report [RUN] [-o FILE]`: a finished run as one self-contained HTML file (no network)."""

from __future__ import annotations

from pathlib import Path

from .runarg import CommandError, run_command, split_args

USAGE = """\
usage: tm report [RUN] [-o FILE]
  RUN      a run directory, a name or unique prefix under .trainmeter/runs, or latest (default)
  -o FILE  where to write the page (default: report.html in the run directory)
  One HTML file: the passport, and a chart of every series; it loads nothing from the network.
"""


def _main(argv: list[str]) -> int:
    if "-h" in argv or "--help" in argv:
        print(USAGE, end="")
        return 0
    runs, opts = split_args("report", argv, set(), {"-o", "--output"})
    from ..runlog.runs import RunNotFound, resolve_run
    from ..views.report import ReportError, build_report

    try:
        run_dir = resolve_run(runs[0] if runs else None)
    except RunNotFound as exc:
        raise CommandError(str(exc)) from None
    named = opts.get("-o") or opts.get("--output")
    target = Path(named or run_dir / "report.html")
    try:
        page = build_report(run_dir)
        # a name that was not UTF-8 (a lone surrogate) is written as its escape, not a crash
        page = page.encode("utf-8", "backslashreplace").decode("utf-8")
    except ReportError as exc:
        raise CommandError(str(exc)) from None
    except OSError as exc:
        raise CommandError(f"cannot read the run log of {run_dir.name} ({exc.strerror})") from None
    try:
        if named:
            target.write_text(page, encoding="utf-8")  # where the user said
        else:  # in the run directory: through its descriptor, never through a planted symlink
            from ..runlog.rundir import write_file

            write_file(run_dir, "report.html", page)
    except OSError as exc:
        raise CommandError(f"cannot write {target} ({exc.strerror or exc})") from None
    print(f"{target} ({len(page.encode()) // 1024} KiB)")
    return 0


def main(argv: list[str]) -> int:
    return run_command("report", _main, argv)
