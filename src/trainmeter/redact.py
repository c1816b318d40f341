"""Secret-looking values in a recorded command line, replaced before anything is written.

Kept apart from `records` so the agent, which imports `records` in every Python a run starts,
does not pay for compiling these patterns.
"""

from __future__ import annotations

import re

_SECRET_WORDS = re.compile(
    r"(api[-_]?key|token|secret|passw(or)?d|passwd|credential|auth|private[-_]?key|access[-_]?key)",
    re.IGNORECASE,
)
#: Flags whose names contain a secret word but hold counts, not secrets.
_COUNT_WORDS = re.compile(r"(max|num|min|n)[-_]?(new[-_]?)?tokens?$|tokens?[-_]?per|tokenizer", re.I)
_SECRET_ENV = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
REDACTED = "<redacted>"


def _is_secret_flag(flag: str) -> bool:
    name = flag.lstrip("-")
    return bool(_SECRET_WORDS.search(name)) and not _COUNT_WORDS.search(name)


def redact_argv(argv: list[str]) -> list[str]:
    """The command line with secret-looking values replaced.

    `--api-key X`, `--hf_token=X`, `--password=X` and `WANDB_API_KEY=X cmd` lose their values;
    `--max-tokens 512` or `--tokens-per-step 4096` stay readable, since those are counts.
    """
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        if arg.startswith("-") and len(arg) > 1:
            flag, eq, _value = arg.partition("=")
            if _is_secret_flag(flag):
                if eq:
                    out.append(f"{flag}={REDACTED}")
                else:
                    out.append(arg)
                    hide_next = True
                continue
        else:
            env = _SECRET_ENV.match(arg)
            if env and _is_secret_flag(env.group(1)):
                out.append(f"{env.group(1)}={REDACTED}")
                continue
        out.append(arg)
    return out
