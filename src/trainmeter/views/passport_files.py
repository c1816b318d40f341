"""The passport's two files in the run directory, and the observer that writes them at the end.

`passport.json` is the record (`passport.build_passport`), `passport.md` its Markdown
(`passport_md.render_markdown`); each is written to a temporary name and moved into place, so a
reader never sees half a file, through the run directory's descriptor (`runlog/rundir.py`): 0600
like the rest of the run, never through a symlink, no temporary file left when the disk is full.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MD_NAME = "passport.md"
JSON_NAME = "passport.json"


def write_passport(run_dir: Path, snap: dict[str, Any]) -> dict[str, Any]:
    """Write `passport.md` and `passport.json` into `run_dir` (atomically); return the record.
    Its modules are imported here, at the end: the observer is made as every run starts, and
    the redaction's patterns alone cost milliseconds to compile."""
    from ..redact import private_dirs
    from ..runlog.rundir import RunDir
    from .passport import build_passport
    from .passport_md import render_markdown

    passport = build_passport(snap, private_dirs(run_dir))
    folder = RunDir.at(run_dir)
    folder.write_text(JSON_NAME, json.dumps(passport, indent=2, allow_nan=False) + "\n")
    folder.write_text(MD_NAME, render_markdown(passport))
    return passport


class PassportWriter:
    """The observer that leaves the passport in the run directory when the run ends."""

    name = "passport"

    def __init__(self, run_dir: Path, warn: Any = None) -> None:
        self.run_dir = Path(run_dir)
        self.warn = warn

    def warm(self) -> None:
        """Import what writing the passport needs now, while the training runs (`tm`'s live
        thread calls it once the engine is loaded), not after it ended."""
        from . import passport, passport_md  # noqa: F401 - loaded for `write_passport`

    def on_finish(self, snap: dict[str, Any]) -> None:
        try:
            write_passport(self.run_dir, snap)
        except OSError as exc:
            if self.warn is not None:
                # The run directory's writes share one warning (the store's key): a full disk
                # that already cost the run log is said once, not again for the passport.
                self.warn("store", f"cannot write the passport ({exc})")
