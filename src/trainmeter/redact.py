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
- names are split on camelCase too (`--hfToken`, `--openaiApiKey`); a one-word name that ends
  in a secret word (`PGPASSWORD`, `--hftoken`) or is an abbreviation argparse would accept of one
  (`--tok`, `--api_k`) counts; `--key:X` is a flag with its value;
- after a secret flag the next argument is its value unless it looks like a flag
  (`--password --Xy!` hides `--Xy!`; `--token --lr 3` keeps both);
- HTTP headers that carry credentials (`Authorization: Bearer X`, `Cookie:`, `X-Api-Key:`),
  `user:password` after `-u`/`--user`, and secret query parameters (`?token=`, `&api_key=`);
- well-known provider token shapes anywhere (`hf_...`, `sk-...`, `ghp_...`, `github_pat_...`,
  `xoxb-...`, `AKIA...`, `glpat-...`, Google, Stripe, npm, PyPI and Slack-app keys, JWTs, PEM
  private keys), whatever flag they follow;
- config keys are keys: Hydra/OmegaConf overrides (`logger.wandb.api_key=V`, `+db.password=V`,
  `++x.token=V`), `name:V`, and inside any text `name=V`, `name: V`, `"name": "V"` (JSON, a
  Python dict, YAML, a connection string's `Password=V;`) when the name says secret;
- credential schemes (`Bearer X`, `Basic X`), URL signatures (`?sig=`, `X-Amz-Signature=`),
  `?code=`, and webhook URLs (Slack, Discord, Teams, any `/hooks/` path), whose path is the
  credential.

Free text from a training process (an exception's message, type, thread and frame, a fact's
note) goes through the same rules (`redact_free`, `scrub_record`), with a secret word and the
credential-looking word after it (`password hunter2`) too.

`tm` applies this once, when the command line is first recorded (`run.start`, `meta.json`), so
every output made from the record inherits it.

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


class _Pattern:
    """A regular expression compiled on its first use: `tm` imports this module as every run
    starts (the command line in `run.start` is redacted) and uses a few of the patterns below;
    compiling all of them there cost ~3 ms of each run's start-up. Used as the compiled one."""

    __slots__ = ("_args", "_compiled")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._args = (pattern, flags)
        self._compiled: re.Pattern[str] | None = None

    def __getattr__(self, name: str) -> Any:
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = re.compile(*self._args)
        return getattr(compiled, name)


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
        "session",
        "dsn",
        "notify",  # tm --notify URL: a webhook's URL lets whoever has it post
        "webhook",
        "pat",
        "jwt",
        "hmac",
        "signature",
        "otp",  # one-time passwords and the like
        "totp",
        "hotp",
        "mfa",
        "passcode",
    }
)
#: Query parameters that carry a credential though their names say nothing (an Azure SAS
#: `sig`, an Azure Functions `code`), beside those whose names say secret (`X-Amz-Signature`).
QUERY_SECRETS = frozenset({"sig", "code", "x-amz-signature", "x-goog-signature", "sharedaccesssignature"})
#: One-word names ending in these are secret too (`PGPASSWORD`, `--hftoken`): long enough that
#: no ordinary word ends in them (`monkey` ends in "key", `compass` in "pass": not those).
SECRET_SUFFIXES = ("password", "passwd", "token", "secret", "apikey", "credential", "credentials")
#: Long secret words whose prefixes (3+ letters) argparse accepts as the whole flag.
ABBREVIATED = ("token", "password", "passwd", "passphrase", "secret", "apikey", "credentials")
#: Prefixes too common to take for an abbreviation of a secret word.
NOT_ABBREVIATIONS = frozenset({"api", "sec", "cre", "pas", "passp"})
#: Headers whose value is a credential.
SECRET_HEADERS = _Pattern(
    r"(?i)(?<![\w-])(authorization|proxy-authorization|cookie|set-cookie|x-api-key|api-key"
    r"|x-auth-token|private-token|x-access-token)(\s*:\s*)([^'\"\n]+)"
)
#: Provider token shapes, wherever they appear (and JSON web tokens, PEM private keys).
TOKEN_SHAPES = _Pattern(
    r"(?<![A-Za-z0-9])(hf_[A-Za-z0-9]{8,}|sk-[A-Za-z0-9_-]{8,}|gh[pousr]_[A-Za-z0-9]{8,}"
    r"|github_pat_[A-Za-z0-9_]{8,}|xox[abeprs]-[A-Za-z0-9-]{8,}|xapp-[A-Za-z0-9-]{8,}"
    r"|A[KS]IA[0-9A-Z]{12,}|glpat-[A-Za-z0-9_-]{8,}|AIza[0-9A-Za-z_-]{30,}"
    r"|[sr]k_(?:live|test)_[A-Za-z0-9]{8,}|npm_[A-Za-z0-9]{20,}|pypi-[A-Za-z0-9_-]{20,}"
    r"|SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----[^-]*(?:-----END [A-Z ]*PRIVATE KEY-----)?)"
)
#: An authorization scheme and its credential, with or without the header's name.
_SCHEMES = _Pattern(r"(?i)(?<![\w-])(bearer|basic|token|digest)(\s+)([A-Za-z0-9._~+/=-]{8,})")
#: Webhook URLs, whose path is the credential: Slack's, Discord's, Teams', and any whose path
#: has a `hooks`/`webhooks` part (Mattermost, Zapier, ...). The path after it is hidden.
_WEBHOOK = _Pattern(
    r"(?i)(https?://(?:hooks\.slack\.com/|[^/\s'\"]*webhook\.office\.com/"
    r"|[^/\s'\"]+/(?:[^\s'\"?#]*/)?(?:webhooks?|hooks|webhookb2)/))([^\s'\"<>]+)"
)
#: `name=value`, `name: value`, `"name": "value"` (JSON, a Python dict, YAML, a connection
#: string's `Password=V;`, a Hydra override's `db.password=V`) in any text: the value is hidden
#: when the name says secret. Names may be dotted (Hydra/OmegaConf keys).
_ASSIGN = _Pattern(
    r"""(?<![\w.])(["']?)([A-Za-z_][\w.-]*)\1(\s*[=:]\s*)"""
    r"""("[^"\n]*"|'[^'\n]*'|[^\s;&,'"<>(){}\[\]]+)"""
)
_QUERY = _Pattern(r"([?&;])([^=&#\s?;]+)=([^&#\s'\";]*)")
_CAMEL = _Pattern(r"([a-z0-9])([A-Z])")
#: What an argument that is a flag looks like (lower case words): anything else is a value.
_FLAG_SHAPE = _Pattern(r"^--?[a-z][a-z0-9]*(?:[-_.][a-z0-9]+)*(?:=.*)?$", re.DOTALL)
_USER_FLAGS = frozenset({"-u", "--user", "--proxy-user", "--basic-user"})

_PARTS = _Pattern(r"[-_.]+")
#: `NAME=value` as a whole argument: an environment assignment, or a Hydra/OmegaConf override
#: (`db.password=V`, `+db.password=V`, `++logger.api_key=V`), the key dotted.
_ENV = _Pattern(r"^(\+{0,2})([A-Za-z_][A-Za-z0-9_.@/-]*)=(.*)$", re.DOTALL)
#: `name:value` as a whole argument (`api_key:V`, a YAML-ish override).
_COLON = _Pattern(r"^([A-Za-z_][A-Za-z0-9_.-]*):(.+)$", re.DOTALL)
#: scheme://userinfo@ : the userinfo is replaced whole (a token is often the "user").
_URL_USERINFO = _Pattern(r"([A-Za-z][A-Za-z0-9+.-]*://)([^/\s@?#]+)@")
_NUMBER = _Pattern(r"^[0-9]+$")
# Inside a shell string: a flag with its value, or NAME=value; values may be quoted.
_VALUE = r"""('[^']*'|"[^"]*"|[^\s;&|'"]+)"""
_SHELL_FLAG = _Pattern(r"(?<![\w-])(--?[A-Za-z][A-Za-z0-9_.-]*)(=|:|\s+)" + _VALUE)
_SHELL_ENV = _Pattern(r"(?<![\w-])([A-Za-z_][A-Za-z0-9_]*)=" + _VALUE)
#: `-pSECRET` inside a shell string, as `redact_argv` takes it in an argument of its own.
_SHELL_P_ATTACHED = _Pattern(r"(?<![\w-])-p(?![0-9]+(?![^\s;&|'\"]))([^\s;&|'\"<]+)")


def is_secret_name(name: str) -> bool:
    """Whether a flag or variable name (`--hf-token`, `WANDB_API_KEY`) has a secret part."""
    bare = _CAMEL.sub(r"\1_\2", name.lstrip("-"))  # hfToken -> hf_Token
    parts = [p.lower() for p in _PARTS.split(bare) if p]
    if any(p in SECRET_PARTS for p in parts):
        return True
    joined = "".join(parts)  # --api-key -> apikey, --access_token -> accesstoken
    if joined in SECRET_PARTS:
        return True
    if any(p.endswith(SECRET_SUFFIXES) for p in parts):
        return True
    return (
        name.startswith("--")
        and len(joined) >= 3
        and joined not in NOT_ABBREVIATIONS
        and any(word.startswith(joined) for word in ABBREVIATED)
    )


def _secret_key(name: str) -> bool:
    """A key of a config (`logger.wandb.api_key`, `+db.password`) whose value is a secret."""
    return is_secret_name(name.lstrip("+~"))


def redact_text(text: str) -> str:
    """What is secret in any text: credential headers and schemes, provider tokens, secret
    `name=value` pairs however written, webhook URLs, URL user info and secret query
    parameters. Used on each argument of a command line, and on free text (a crash message)."""
    if ":" in text:
        text = SECRET_HEADERS.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = TOKEN_SHAPES.sub(REDACTED, text)
    text = _SCHEMES.sub(_scheme, text)
    if "=" in text and ("?" in text or "&" in text):
        text = _QUERY.sub(
            lambda m: f"{m.group(1)}{m.group(2)}={REDACTED}"
            if m.group(3) and (is_secret_name(m.group(2)) or m.group(2).lower() in QUERY_SECRETS)
            else m.group(0),
            text,
        )
    if "//" in text:
        text = _WEBHOOK.sub(lambda m: f"{m.group(1)}{REDACTED}", text)
    if "=" in text or ":" in text:
        text = _assignments(text)
    return redact_urls(text)


def _assignments(text: str) -> str:
    """`_ASSIGN`'s pairs hidden, each looked for from just past the last one's separator, so
    a pair whose value is another pair's name (`config: api_key = V`) is not skipped over."""
    out: list[str] = []
    pos = 0
    while True:
        match = _ASSIGN.search(text, pos)
        if match is None:
            out.append(text[pos:])
            return "".join(out)
        shown = _assignment(match)
        if shown == match.group(0):  # not a secret: look again from its value on
            out.append(text[pos:match.start(4)])
            pos = match.start(4)
        else:
            out.append(text[pos:match.start()] + shown)
            pos = match.end()


def _scheme(match: re.Match[str]) -> str:
    """`Bearer X`: X hidden when it looks like a credential (a digit in it, or long), not a
    word (`token expired`, `Basic authentication`)."""
    value = match.group(3)
    if any(c.isdigit() for c in value) or len(value) >= 20:
        return f"{match.group(1)}{match.group(2)}{REDACTED}"
    return match.group(0)


def _assignment(match: re.Match[str]) -> str:
    quote, name, sep, value = match.groups()
    if value == REDACTED or value.startswith(("//", "/")) or not _secret_key(name):
        return match.group(0)  # a URL's scheme (`http://`) is no assignment
    if value[:1] in "\"'":
        value = f"{value[0]}{REDACTED}{value[0]}"
    else:
        value = REDACTED
    return f"{quote}{name}{quote}{sep}{value}"


def redact_free(text: str) -> str:
    """Free text (an exception's message, a thread's name, a traceback's frame) with every
    rule of a command line applied, flags with their values included: the message of
    `psycopg2.connect("postgres://admin:PW@db")` failing, `password=...`, `hf_...`,
    `Bearer ...` never reach a file, a terminal or a webhook."""
    if not text:
        return text
    text = _WORD_THEN_SECRET.sub(_word_then_secret, text)
    return redact_shell(text)


#: In free text, a word that names a secret and the credential-looking word after it (`login
#: bob password hunter2`, a netrc line); `password incorrect` stays.
_WORD_THEN_SECRET = _Pattern(
    r"(?i)(?<![\w-])(password|passwd|passphrase|pwd|secret|token)([ \t]+)([^\s'\"]+)"
)


def _word_then_secret(match: re.Match[str]) -> str:
    value = match.group(3)
    if value.startswith(REDACTED) or value[:1] in "=:":
        return match.group(0)  # `password=...` and `password: ...` are pairs: _ASSIGN's
    if any(c.isdigit() for c in value) or not value.isalpha() or len(value) >= 16:
        return f"{match.group(1)}{match.group(2)}{REDACTED}"
    return match.group(0)


#: Record kinds that carry free text from the training process: an exception's message, type,
#: thread and frame (`crash`), a fact's note and reason (`counted_unavailable`: an exception).
FREE_TEXT_KINDS = frozenset({"crash", "fact"})
#: The longest free text kept from a record (a message past it is cut, with a mark).
MAX_FREE_TEXT = 4000


def scrub_record(record: dict[str, Any]) -> bool:
    """Redact, in place, the free text of a `crash` or `fact` record (every string of a crash's
    payload, a fact's note and text value), show its control characters as escapes (`\\x1b`;
    newlines and tabs kept), and cut what is longer than `MAX_FREE_TEXT`.
    True when anything changed. `tm` applies it before the record is written, live and when a
    log is read back, so every file, view and webhook made from the record inherits it."""
    d = record.get("d")
    if not isinstance(d, dict):
        return False
    kind = record.get("kind")
    if kind == "crash":
        names: Any = list(d)
    elif kind == "fact":
        names = ("note", "value")
    else:
        return False
    changed = False
    for name in names:
        value = d.get(name)
        clean = _scrub_value(value)
        if clean is not value and clean != value:
            d[name] = clean
            changed = True
    return changed


def _scrub_value(value: Any, depth: int = 0) -> Any:
    if isinstance(value, str):
        from .visible import visible

        # an escape sequence in it reaches no terminal as a command (`tm runs`, the end line)
        text = visible(redact_free(value), newlines=True)
        return text if len(text) <= MAX_FREE_TEXT else text[:MAX_FREE_TEXT] + "…"
    if depth < 4 and isinstance(value, list):
        return [_scrub_value(v, depth + 1) for v in value]
    if depth < 4 and isinstance(value, dict):
        return {k: _scrub_value(v, depth + 1) for k, v in value.items()}
    return value


def _is_flag(arg: str) -> bool:
    return bool(_FLAG_SHAPE.match(arg)) or (arg.startswith("-") and _NUMBER.match(arg[1:]) is None
                                            and len(arg) == 2 and arg[1].isalpha())


def redact_urls(text: str) -> str:
    """`postgres://u:S@h/db` -> `postgres://<redacted>@h/db`, anywhere in `text`."""
    if "://" not in text:
        return text
    return _URL_USERINFO.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)


def redact_shell(text: str) -> str:
    """The same rules inside one string that is a shell command (`bash -c "..."`)."""

    def flag(match: re.Match[str]) -> str:
        name, sep, value = match.group(1), match.group(2), match.group(3)
        if sep == ":" and not is_secret_name(name):
            return match.group(0)
        if value.startswith("-") and (sep.isspace() or not sep) and _is_flag(value.strip("'\"")):
            return match.group(0)  # the next flag, not a value
        if _hides_value(name, value):
            return f"{name}{sep}{REDACTED}"
        return match.group(0)

    def env(match: re.Match[str]) -> str:
        if is_secret_name(match.group(1)):
            return f"{match.group(1)}={REDACTED}"
        return match.group(0)

    text = SECRET_HEADERS.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = _SHELL_FLAG.sub(flag, text)
    text = _SHELL_ENV.sub(env, text)
    text = _SHELL_P_ATTACHED.sub(lambda m: f"-p{REDACTED}", text)  # mysql -phunter2
    return redact_text(text)


def _hides_value(flag: str, value: str) -> bool:
    """Whether the value that follows `flag` (as `--flag value` or `--flag=value`) is hidden."""
    if is_secret_name(flag):
        return True
    if flag in _USER_FLAGS and ":" in value:
        return True  # curl -u user:password
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
                out.append(f"{flag}={REDACTED}" if _hides_value(flag, value) else redact_text(arg))
                continue
            name, colon, value = arg.partition(":")
            if colon and is_secret_name(name):
                out.append(f"{name}:{REDACTED}")  # --key:X
                continue
            if not arg.startswith("--") and arg[:2] in ("-p", "-u") and len(arg) > 2:
                hide = ":" in arg[2:] if arg[:2] == "-u" else not _NUMBER.match(arg[2:])
                out.append(f"{arg[:2]}{REDACTED}" if hide else redact_text(arg))  # -phunter2
                continue
            out.append(redact_text(arg))
            if i < len(argv) and not _is_flag(argv[i]) and _hides_value(arg, argv[i]):
                out.append(REDACTED)
                i += 1
            continue
        env = _ENV.match(arg)
        if env and is_secret_name(env.group(2)):
            out.append(f"{env.group(1)}{env.group(2)}={REDACTED}")
            continue
        colon = _COLON.match(arg)
        if colon and is_secret_name(colon.group(1)) and not colon.group(2).startswith("//"):
            out.append(f"{colon.group(1)}:{REDACTED}")
            continue
        out.append(redact_text(arg))
    return out


# ---- a passport: what is handed on ----------------------------------------------------------

#: Values shaped like tokens of common services, hidden wherever they appear in the command line.
_TOKEN_SHAPES = _Pattern(
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
