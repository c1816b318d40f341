"""Why a run was watched from outside only: judged once the run is over.

The live watcher gives a Python a couple of seconds before it judges it, so a short run would
end unexplained; when no process of the run said hello, this judges from the command itself and
records why (once, as the fact `observe_only`), and says it on stderr, however short the run.
"""

from __future__ import annotations

import os

from ..payloads import FACT

TYPE_CHECKING = False  # what only annotations need: imported by type checkers, not by a run
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Protocol

    from ..runlog.recorder import Recorder
    from .ingest import Ingest
    from .options import RunOptions

    class Judged(Protocol):
        """What the judgement reads of the session (`session.Session`)."""

        recorder: Recorder | None
        ingest: Ingest | None
        ingest_error: str | None
        launched: bool
        opts: RunOptions
        child_env: dict[str, str] | None
        warn: Callable[[str, str], None]


def explain_observe_only(session: Judged) -> None:
    """No process said hello: record why (once), and say it on stderr."""
    recorder = session.recorder
    if recorder is None or not session.launched or recorder.hello_pid_set():
        return
    if not session.opts.agent:
        reason, source = "tm --no-agent: the agent was not loaded, as asked", "declared"
    elif session.ingest is None:
        reason = "tm could not open its socket, so the agent had nowhere to report"
        if session.ingest_error:
            reason += f" ({session.ingest_error})"
        source = "detected"
    elif recorder.observe_only:
        reason, source = "", ""
    else:
        from .agentless import reason_without_hello

        env = session.child_env if session.child_env is not None else dict(os.environ)
        reason, source = reason_without_hello(session.opts.command, env), "detected"
    if reason:
        note = "judged when the run ended: no process of the run said hello"
        recorder.write_tm(
            FACT, {"key": "observe_only", "value": reason, "source": source, "note": note}
        )
    if session.opts.agent:
        for said in recorder.observe_only:
            session.warn(f"observe_only:{said}", f"observe only: {said}")
