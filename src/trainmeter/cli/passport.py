"""`tm passport [RUN] [--json]`: a run's passport, rebuilt from its log and printed.

The passport is rebuilt by replaying `events.jsonl` (so a crashed run, or one recorded by an
older version, gets one too) and `passport.md` / `passport.json` in the run directory are
rewritten with it.
"""

from __future__ import annotations

import json
import sys

from .runarg import loaded_run, run_command, split_args

USAGE = """\
usage: tm passport [RUN] [--json] [--no-write]
  RUN         a run directory, a name or unique prefix under .trainmeter/runs, or latest (default)
  --json      print the complete record (every number with its provenance) instead of Markdown
  --no-write  print only; leave passport.md and passport.json in the run directory as they are
"""


def _main(argv: list[str]) -> int:
    if "-h" in argv or "--help" in argv:
        print(USAGE, end="")
        return 0
    runs, opts = split_args("passport", argv, {"--json", "--no-write"}, set())
    run_dir, snap = loaded_run(runs[0] if runs else None)
    from ..redact import private_dirs
    from ..views.passport import build_passport
    from ..views.passport_files import write_passport
    from ..views.passport_md import render_markdown

    if opts.get("--no-write"):
        passport = build_passport(snap, private_dirs(run_dir))
    else:
        try:
            passport = write_passport(run_dir, snap)
        except OSError as exc:
            print(f"tm passport: cannot write into {run_dir.name} ({exc.strerror})", file=sys.stderr)
            passport = build_passport(snap, private_dirs(run_dir))
    if opts.get("--json"):
        print(json.dumps(passport, indent=2, allow_nan=False), flush=True)
    else:
        print(render_markdown(passport), end="", flush=True)
    return 0


def main(argv: list[str]) -> int:
    return run_command("passport", _main, argv)
