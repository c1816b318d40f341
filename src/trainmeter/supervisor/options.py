"""`RunOptions`: what `tm` was asked to run, and the facts the user declared about it.

The command line (`cli/args.py`) fills it in; the supervisor only reads it. It lives here, on the
supervisor's side, so that the supervisor depends on nothing in `cli/`.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing costs milliseconds before the child starts
if TYPE_CHECKING:
    from typing import Any


class RunOptions:
    """What `tm` was asked to run, and the facts the user declared about it.

    A plain class, not a dataclass: importing dataclasses costs `tm` some 5 ms at every start.
    """

    def __init__(self) -> None:
        self.command: list[str] = []
        self.name: str | None = None
        self.declared: dict[str, Any] = {}  # fact key -> value
        self.notes: dict[str, str] = {}  # fact key -> note (the peak's source)
        self.gpus: str | None = None
        self.port: int | None = None
        self.run_id: str | None = None  # shared by every node of one job (supervisor/job.py)
        self.metrics_addr: tuple[str, int] | None = None  # --metrics-addr: /metrics alone
        self.notify: list[str] = []  # --notify URL (secrets: never recorded, never shown)
        self.web = True
        self.agent = True
        self.tap = True
        self.quiet = False
        self.script: str | None = None  # the Python script, when `tm script.py` was used
        self.show: str | None = None  # "help" or "version": print and exit 0

    @property
    def default_name(self) -> str:
        """The run's name: --name, else the script's stem, else the command's basename."""
        if self.name:
            return self.name
        if self.script:
            return _stem(self.script)
        if len(self.command) >= 3 and self.command[1] == "-m":
            return self.command[2].rsplit(".", 1)[-1]
        for word in self.command[1:]:
            if word.endswith(".py") and not word.startswith("-"):
                return _stem(word)  # `torchrun ... train.py` is the train run
        return os.path.basename(self.command[0]) if self.command else "run"


def _stem(path: str) -> str:
    base = os.path.basename(path.rstrip("/"))
    return base[:-3] if base.endswith(".py") else base
