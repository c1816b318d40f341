"""Secret-looking values in a recorded command line, replaced before anything is written.

A command line is written to `meta.json`, `run.start` in `events.jsonl` and `summary.json`, files
people share; a key or password typed on it must not reach them. The rules, applied to each
argument and, the same way, inside an argument that is itself a shell command
(`bash -c "python train.py --api-key X"`):

- a flag whose name, split on `-` and `_`, has a secret part (`key`, `token`, `secret`,
  `pass`, `password`, `pwd`, `auth`, `credential`, `cookie`, `apikey`, ...) loses its value,
  in both `--flag=value` and `--flag value` forms; so does `NAME=value` (an environment
  assignment such as `WANDB_API_KEY=...`). Whole parts only: `--passes 3`, `--max-tokens 512`,
  `--tokenizer gpt2` and `--keyframes 4` stay readable;
- the user and password of a URL (`postgres://u:S@h`, `https://user:pw@host`), wherever it is;
- `-p`, which is a password to some programs and a port to others, loses a value that is not a
  plain number: `-p 8080` stays, `-p hunter2` and `-phunter2` do not.

Kept apart from `records` so the agent, which imports `records` in every Python a run starts,
does not pay for compiling these patterns.

A passport, a file meant to be handed on, is scrubbed further (`scrub_command`, `scrub_strings`,
`private_dirs`): token-shaped words hidden, paths cut to their base names, the run's, project's
and home directories and the host's name replaced wherever they appear.
"""

from __future__ import annotations

import os
import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

REDACTED = "<redacted>"

#: Parts of a flag's or variable's name that mark its value as a secret.
SECRET_PARTS = frozenset(
    {
        "key",
        "apikey",
        "accesskey",
        "privatekey",
        "secretkey",
        "token",
        "accesstoken",
        "authtoken",
        "secret",
        "secrets",
        "pass",
        "passwd",
        "password",
        "passwords",
        "passphrase",
        "pwd",
        "pw",
        "auth",
        "authorization",
        "credential",
        "credentials",
        "creds",
        "cookie",
        "cookies",
        "bearer",
        "sessionid",
        "dsn",
        "notify",  # tm --notify URL: a webhook's URL lets whoever has it post
        "webhook",
    }
)

_PARTS = re.compile(r"[-_.]+")
_ENV = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)
#: scheme://userinfo@ : the userinfo is replaced whole (a token is often the "user").
_URL_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)([^/\s@?#]+)@")
_NUMBER = re.compile(r"^[0-9]+$")
# Inside a shell string: a flag with its value, or NAME=value; values may be quoted.
_VALUE = r"""('[^']*'|"[^"]*"|[^\s;&|'"]+)"""
_SHELL_FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z][A-Za-z0-9_.-]*)(=|\s+)" + _VALUE)
_SHELL_ENV = re.compile(r"(?<![\w-])([A-Za-z_][A-Za-z0-9_]*)=" + _VALUE)


def is_secret_name(name: str) -> bool:
    """Whether a flag or variable name (`--hf-token`, `WANDB_API_KEY`) has a secret part."""
    parts = [p.lower() for p in _PARTS.split(name.lstrip("-")) if p]
    if any(p in SECRET_PARTS for p in parts):
        return True
    joined = "".join(parts)  # --api-key -> apikey, --access_token -> accesstoken
    return joined in SECRET_PARTS


def redact_urls(text: str) -> str:
    """`postgres://u:S@h/db` -> `postgres://<redacted>@h/db`, anywhere in `text`."""
    if "://" not in text:
        return text
    return _URL_USERINFO.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)


def redact_shell(text: str) -> str:
    """The same rules inside one string that is a shell command (`bash -c "..."`)."""

    def flag(match: re.Match[str]) -> str:
        name, sep, value = match.group(1), match.group(2), match.group(3)
        if value.startswith("-") and not _NUMBER.match(value.lstrip("-")):
            return match.group(0)  # the next flag, not a value
        if _hides_value(name, value):
            return f"{name}{sep}{REDACTED}"
        return match.group(0)

    def env(match: re.Match[str]) -> str:
        if is_secret_name(match.group(1)):
            return f"{match.group(1)}={REDACTED}"
        return match.group(0)

    text = _SHELL_FLAG.sub(flag, text)
    text = _SHELL_ENV.sub(env, text)
    return redact_urls(text)


def _hides_value(flag: str, value: str) -> bool:
    """Whether the value that follows `flag` (as `--flag value` or `--flag=value`) is hidden."""
    if is_secret_name(flag):
        return True
    return flag == "-p" and not _NUMBER.match(value)


def redact_argv(argv: list[str]) -> list[str]:
    """The command line with secret-looking values replaced (the rules are above)."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if any(c.isspace() for c in arg):
            out.append(redact_shell(arg))
            continue
        if arg.startswith("-") and len(arg) > 1 and not _NUMBER.match(arg[1:]):
            flag, eq, value = arg.partition("=")
            if eq:
                out.append(f"{flag}={REDACTED}" if _hides_value(flag, value) else redact_urls(arg))
                continue
            if not arg.startswith("--") and arg.startswith("-p") and len(arg) > 2:
                out.append(arg if _NUMBER.match(arg[2:]) else f"-p{REDACTED}")  # -phunter2
                continue
            out.append(arg)
            if i < len(argv) and not argv[i].startswith("--") and _hides_value(arg, argv[i]):
                out.append(REDACTED)
                i += 1
            continue
        env = _ENV.match(arg)
        if env and is_secret_name(env.group(1)):
            out.append(f"{env.group(1)}={REDACTED}")
            continue
        out.append(redact_urls(arg))
    return out


# ---- a passport: what is handed on ----------------------------------------------------------

#: Values shaped like tokens of common services, hidden wherever they appear in the command line.
_TOKEN_SHAPES = re.compile(
    r"^(hf_[A-Za-z0-9]{8,}|sk-[A-Za-z0-9_-]{8,}|gh[pousr]_[A-Za-z0-9]{8,}|xox[abp]-[A-Za-z0-9-]{8,}"
    r"|AKIA[0-9A-Z]{12,}|[0-9a-f]{40})$"
)


def scrub_command(argv: Any) -> list[str]:
    """The command line with secrets hidden and each path cut to its base name."""
    if not isinstance(argv, list):
        return []
    out: list[str] = []
    for arg in redact_argv([str(a) for a in argv]):
        flag, eq, value = arg.partition("=")
        if eq and flag.startswith("-"):
            out.append(f"{flag}={_scrub_word(value)}")
        else:
            out.append(_scrub_word(arg))
    return out


def _scrub_word(word: str) -> str:
    if word == REDACTED:
        return word
    if _TOKEN_SHAPES.match(word):
        return REDACTED
    if "/" in word or os.sep in word:
        return os.path.basename(word.rstrip("/" + os.sep)) or word
    return word


def scrub_strings(obj: Any, paths: list[str], hosts: list[str]) -> Any:
    """Every string in `obj` with the given paths replaced and host names hidden."""
    host_res = [re.compile(rf"(?<![\w.-]){re.escape(h)}(?![\w-])") for h in hosts if len(h) >= 2]
    paths = sorted({str(p).rstrip("/") for p in paths if len(str(p)) > 1}, key=len, reverse=True)

    def clean(value: Any) -> Any:
        if isinstance(value, str):
            for path in paths:
                value = value.replace(path, "<dir>")
            for pattern in host_res:
                value = pattern.sub("<host>", value)
            return value
        if isinstance(value, dict):
            return {clean(k): clean(v) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    return clean(obj)


def private_dirs(run_dir: Path | None) -> list[str]:
    """The directories a passport must not name: the run's, the project's, the home."""
    from pathlib import Path

    paths = [str(Path.home())]
    if run_dir is not None:
        run_dir = Path(run_dir).resolve()
        paths += [str(run_dir), str(run_dir.parent.parent.parent)]
    paths.append(os.getcwd())
    return [p for p in paths if p not in ("/", "")]
