"""`tm export wandb|csv|parquet [RUN]`: a finished run into the tools a team already uses.

The run is replayed from its log (see `exporters.tables`), so a crashed run exports too.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from .runarg import CommandError, run_command, split_args

USAGE = """\
usage: tm export wandb [RUN] --project P [--entity E] [--name N]
       tm export csv [RUN] [-o FILE]
       tm export parquet [RUN] [-o FILE]
  RUN  a run directory, a name or unique prefix under .trainmeter/runs, or latest (default)
  wandb    one W&B run: the loop's series, trainmeter's numbers under trainmeter/, the passport
           as config and summary (WANDB_MODE=offline writes it locally)
  csv      one row a step: step, time_s, each series, trainmeter/... (default FILE: RUN.csv)
  parquet  the same table as Parquet (needs pyarrow: pip install 'trainmeter[parquet]')
"""

FORMATS = ("wandb", "csv", "parquet")


def _main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, end="", file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    fmt, rest = argv[0], argv[1:]
    if fmt not in FORMATS:
        raise CommandError(f"{fmt!r} is not a format to export to ({', '.join(FORMATS)})")
    if "-h" in rest or "--help" in rest:
        print(USAGE, end="")
        return 0
    valued = {"--project", "--entity", "--name"} if fmt == "wandb" else {"-o", "--output"}
    runs, opts = split_args("export", rest, set(), valued)
    if fmt == "wandb" and not opts.get("--project"):
        raise CommandError("wandb needs --project P (the W&B project to create the run in)")

    from ..exporters.tables import ExportError, run_table, write_csv, write_parquet
    from ..runlog.runs import RunNotFound, resolve_run

    try:
        run_dir = resolve_run(runs[0] if runs else None)
    except RunNotFound as exc:
        raise CommandError(str(exc)) from None
    if fmt == "parquet":  # say it before the replay, not after
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise CommandError(
                "Parquet needs pyarrow, which is not installed: pip install 'trainmeter[parquet]'"
                " (or tm export csv)"
            ) from None
    try:
        table = run_table(run_dir)
    except OSError as exc:
        raise CommandError(f"cannot read the run log of {run_dir.name} ({exc.strerror})") from None
    try:
        if fmt == "wandb":
            return _wandb(run_dir, table, opts)
        target = Path(opts.get("-o") or opts.get("--output") or f"{run_dir.name}.{fmt}")
        if str(target) == "-":  # `-o -`: to stdout, as Unix tools do
            if fmt == "csv":
                write_csv(table, sys.stdout)
                sys.stdout.flush()
            else:
                sys.stdout.flush()
                write_parquet(table, sys.stdout.buffer)
                sys.stdout.buffer.flush()
            print(f"{len(table.rows)} rows, {len(table.columns)} columns -> stdout", file=sys.stderr)
            return 0
        if opts.get("-o") or opts.get("--output"):
            (write_csv if fmt == "csv" else write_parquet)(table, target)  # where you said
        else:
            _write_default(table, target, fmt)
    except ExportError as exc:
        raise CommandError(str(exc)) from None
    except OSError as exc:
        raise CommandError(f"cannot write {target} ({exc.strerror})") from None
    print(f"{len(table.rows)} rows, {len(table.columns)} columns -> {target}")
    return 0


def _write_default(table, target: Path, fmt: str) -> None:
    """The export under its default name in the working directory, never through a symlink
    planted at that name (a shared directory): `O_NOFOLLOW` refuses it, and `-o` names
    another file."""
    from ..exporters.tables import write_csv, write_parquet

    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(target, flags, 0o644)
    except OSError as exc:
        if os.path.islink(target):
            raise CommandError(f"{target} is a symlink: not written through (-o names a file)") from None
        raise exc
    if fmt == "csv":
        with open(fd, "w", newline="", encoding="utf-8", errors="backslashreplace") as fh:
            write_csv(table, fh)
    else:
        with open(fd, "wb") as fh:
            write_parquet(table, fh)


def _wandb(run_dir: Path, table, opts: dict) -> int:
    from ..exporters.wandb import export_wandb
    from ..redact import private_dirs
    from ..views.passport import build_passport

    passport = build_passport(table.snapshot, private_dirs(run_dir))
    about = export_wandb(
        table, passport, opts["--project"], name=opts.get("--name"), entity=opts.get("--entity")
    )
    where = about.get("url") or about.get("dir") or ""
    print(f"W&B run {about.get('name')} ({about.get('id')}): {len(table.rows)} steps {where}")
    return 0


def main(argv: list[str]) -> int:
    return run_command("export", _main, argv)
