"""Parsing `tm [options] script.py [args]` and `tm [options] -- command ...`.

Why a hand-written parser rather than argparse: everything after the script name belongs to the
script (`tm train.py --lr 3` must pass `--lr` on, even where it clashes with one of ours), a bad
value must be one clear line and exit 2 before anything starts, and `tm`'s start-up cost matters
(argparse pulls in gettext and friends). Declared facts accept SI suffixes (20B, 1.5e9, 300M, 2k)
and are parsed with `Decimal` so that `2.3k` is 2300 and not 2299.9999999999995.
"""

from __future__ import annotations

import os
import re
import sys

from ..supervisor.options import RunOptions

_SI = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9, "g": 10**9, "t": 10**12}
_NUMBER = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([kmbgt]?)\s*$", re.IGNORECASE)
_HINT = "(use 20B, 1.5e9, 300M)"


def port_number(text: str) -> int | None:
    """The port `text` writes (0-65535, ASCII digits only), or None. `str.isdigit` alone lets
    '²' through, and `int('²')` raises: a traceback where a one-line refusal belongs.
    Here rather than in `runarg`, which pulls in pathlib and typing: `tm`'s start-up reads it."""
    if not text.isascii() or not text.isdigit() or int(text) > 65535:
        return None
    return int(text)

_USAGE = """\
usage: tm [options] script.py [script args]     run a Python training script and watch it
       tm [options] -m module [args]            the same for `python -m module`
       tm [options] -- command [args]           any command: torchrun, a shell script, ...
       (`tm python train.py`, `tm torchrun ...`: a program on PATH is run as after `--`)
       tm summary [RUN] [--json]                a finished run's summary, replayed from its log
       tm top [RUN]                             a run on one full terminal, live while it runs
       tm view [RUN ...] [--port N]             a finished run in the web dashboard
       tm doctor | hardware | attach PID        what tm can see here, the node, a running PID
       tm runs | compare A B                    the runs here; two runs side by side
       tm passport | report | export [RUN]      a run's passport, HTML report, W&B/CSV/Parquet
       tm check RUN [thresholds] [--json]       exit 1 when a run misses its thresholds (CI)

options (before the script or command):
  --budget-tokens N   --budget-steps N   --budget-flops N      the budget, for progress and ETA
  --tokens-per-step N --flops-per-token N                      declared throughput facts
  --samples-per-step N --flops-per-sample N                    the same for models without tokens
<convention>
  --params N  --embedding-params N  --layers N  --d-model N  --seq-len N  --dp N
  --experts N --top-k K --routed-params N                      mixture of experts: active params
  --plan-mfu F (0.4 or 40%)  --plan-hours H                    the plan, compared with the run
  --peak-tflops X --peak-source TEXT                           a declared dense peak per GPU
  --name NAME  --gpus 0,1  --no-agent  --no-tap  -q/--quiet  --version  -h/--help
  --run-id ID         one id for every node of a multi-node job (default: the launcher's
                      rendezvous id or SLURM_JOB_ID)
  --metrics-addr HOST:PORT  serve Prometheus /metrics alone on this address while the run goes
  --notify URL        post each new alert, the cause of death and the end line as JSON to this
                      webhook (Slack-compatible `text`); repeatable; the URL is never recorded
  --port N  --no-web      the dashboard's first port to try (default 8765, 0: any), or none
numbers accept SI suffixes: 20B, 1.5e9, 300M, 2k
"""


def conventions() -> tuple[str, ...]:
    """`--convention`'s choices: every registered FLOPs convention (engine/flops.py), read on
    use, so that a `tm` run that names none does not import it before the child starts."""
    from ..engine.flops import names

    return names()


def usage() -> str:
    """`tm --help`'s text, with the conventions' choices as registered."""
    line = f"  --convention {{{','.join(conventions())}}}"
    line = line.ljust(62) + " the FLOPs convention for MFU"
    return _USAGE.replace("<convention>", line)


TYPE_CHECKING = False
if TYPE_CHECKING:
    from decimal import Decimal


class UsageError(Exception):
    """A command line `tm` will not start from. The message is the one line the user sees."""


def parse_si(flag: str, text: str) -> Decimal:
    """A non-negative number with an optional SI suffix (case-insensitive K/M/B/G/T)."""
    from decimal import Decimal, DecimalException  # on use: 1.4 ms of every start
    match = _NUMBER.match(text)
    if not match:
        raise UsageError(f"{flag}: {text!r} is not a number {_HINT}")
    try:
        value = Decimal(match.group(1)) * _SI[match.group(2).lower()]
    except DecimalException:  # 1e999999999: past what Decimal's context holds
        raise UsageError(f"{flag}: {text!r} is out of range") from None
    if not value.is_finite():
        raise UsageError(f"{flag}: {text!r} is not a finite number")
    return value


#: The largest value each declared number may take: far above any real training, low enough
#: that every one is a finite float (1e400 would be infinity) and the arithmetic on it is too.
#: budget FLOPs: 1e32 is a million times the largest training runs of 2025.
LIMITS: dict[str, float] = {
    "--budget-tokens": 1e18,
    "--budget-steps": 1e15,
    "--budget-flops": 1e32,
    "--tokens-per-step": 1e12,
    "--flops-per-token": 1e18,
    "--samples-per-step": 1e12,  # as many as tokens a step: past it, products overflow
    "--flops-per-sample": 1e18,
    "--params": 1e16,
    "--embedding-params": 1e16,
    "--layers": 1e6,
    "--d-model": 1e8,
    "--seq-len": 1e10,
    "--experts": 1e6,
    "--top-k": 1e6,
    "--routed-params": 1e16,
    "--dp": 1e8,
    "--plan-hours": 1e6,  # a century
    "--peak-tflops": 1e6,  # TFLOP/s per GPU: a thousand times today's fastest
}
#: The smallest positive value an amount may take: below it the number is a typo (or rounds to 0).
FLOORS: dict[str, float] = {
    "--plan-hours": 1e-6,  # 3.6 ms
    "--peak-tflops": 1e-6,
    "--budget-flops": 1.0,
    "--flops-per-token": 1.0,
}


def _check_range(flag: str, text: str, value: Decimal) -> None:
    from decimal import Decimal  # on use: 1.4 ms of every start
    high = LIMITS.get(flag)
    if high is not None and value > Decimal(repr(high)):
        raise UsageError(f"{flag}: {text!r} is out of range (at most {high:g})")
    low = FLOORS.get(flag)
    if low is not None and 0 < value < Decimal(repr(low)):
        raise UsageError(f"{flag}: {text!r} is out of range (at least {low:g})")


def parse_count(flag: str, text: str, *, allow_zero: bool = False) -> int:
    """A whole number such as a parameter count or a layer count."""
    value = parse_si(flag, text)
    _check_range(flag, text, value)
    if value != value.to_integral_value():
        raise UsageError(f"{flag}: {text!r} is not a whole number")
    if value < 0 or (value == 0 and not allow_zero):
        raise UsageError(f"{flag}: {text!r} must be {'0 or more' if allow_zero else 'above 0'}")
    return int(value)


def parse_amount(flag: str, text: str) -> float:
    """A positive real number such as FLOPs, hours or TFLOP/s: finite, in range, above 0."""
    value = parse_si(flag, text)
    if value <= 0:
        raise UsageError(f"{flag}: {text!r} must be above 0")
    _check_range(flag, text, value)
    number = float(value)
    if not 0 < number < float("inf"):  # no limit set: still never 0 or infinity as a float
        raise UsageError(f"{flag}: {text!r} is out of range")
    return number


def parse_addr(flag: str, text: str) -> tuple[str, int]:
    """HOST:PORT (or :PORT for loopback; [::1]:PORT for IPv6) for a listening socket."""
    host, sep, port_text = text.strip().rpartition(":")
    port = port_number(port_text) if sep else None
    if not port:
        raise UsageError(f"{flag}: {text!r} is not HOST:PORT (127.0.0.1:9400)")
    host = host.strip("[]") or "127.0.0.1"
    return host, port


def parse_fraction(flag: str, text: str) -> float:
    """A fraction in (0, 1], written 0.4 or 40%."""
    from decimal import Decimal, DecimalException  # on use: 1.4 ms of every start
    stripped = text.strip()
    percent = stripped.endswith("%")
    body = stripped[:-1] if percent else stripped
    try:
        value = Decimal(body.strip())
    except DecimalException:
        raise UsageError(f"{flag}: {text!r} is not a fraction (use 0.4 or 40%)") from None
    if not value.is_finite():
        raise UsageError(f"{flag}: {text!r} is not a fraction (use 0.4 or 40%)")
    if percent:
        value /= 100
    if not 0 < value <= 1 or float(value) == 0.0 or value < Decimal("1e-6"):
        raise UsageError(f"{flag}: {text!r} must be between 0 and 1 (use 0.4 or 40%)")
    return float(value)


# flag -> (fact key, parser)
_FACT_FLAGS = {
    "--budget-tokens": ("budget_tokens", parse_count),
    "--budget-steps": ("budget_steps", parse_count),
    "--budget-flops": ("budget_flops", parse_amount),
    "--tokens-per-step": ("tokens_per_step", parse_count),
    "--flops-per-token": ("flops_per_token", parse_amount),
    "--samples-per-step": ("samples_per_step", parse_count),
    "--flops-per-sample": ("flops_per_sample", parse_amount),
    "--params": ("n_params", parse_count),
    "--embedding-params": ("n_embedding_params", lambda f, t: parse_count(f, t, allow_zero=True)),
    "--layers": ("n_layers", parse_count),
    "--d-model": ("d_model", parse_count),
    "--seq-len": ("seq_len", parse_count),
    "--experts": ("moe_experts", parse_count),
    "--top-k": ("moe_top_k", parse_count),
    "--routed-params": ("moe_routed_params", parse_count),
    "--dp": ("dp", parse_count),
    "--plan-mfu": ("plan_mfu", parse_fraction),
    "--plan-hours": ("plan_hours", parse_amount),
}
_VALUE_FLAGS = {
    "--convention", "--peak-tflops", "--peak-source", "--name", "--gpus", "--port",
    "--run-id", "--metrics-addr", "--notify",
}
_SWITCHES = {
    "--no-web": "web",
    "--no-agent": "agent",
    "--no-tap": "tap",
}


def is_python_script(word: str) -> bool:
    """`train.py` (there or not: a missing one is said so at launch, 127), `-` (stdin), a
    directory with `__main__.py`, or an existing file that is not itself a program (a script
    without the `.py` ending)."""
    if word == "-" or word.endswith((".py", ".pyw", ".pyz")):
        return True
    if os.path.isdir(word):  # a directory with a __main__.py, as `python DIR` runs it
        return os.path.isfile(os.path.join(word, "__main__.py"))
    return os.path.isfile(word) and not os.access(word, os.X_OK)


def find_program(word: str) -> str | None:
    """The program a word names: a path to an executable file, or a name on PATH."""
    if os.sep in word or (os.altsep and os.altsep in word):
        return word if os.path.isfile(word) and os.access(word, os.X_OK) else None
    import shutil  # here: every run's start-up would pay it (bz2, lzma, fnmatch)

    return shutil.which(word)


def _parse_value_flag(opts: RunOptions, flag: str, value: str) -> None:
    if flag in _FACT_FLAGS:
        key, parser = _FACT_FLAGS[flag]
        opts.declared[key] = parser(flag, value)
    elif flag == "--convention":
        choices = conventions()
        if value not in choices:
            raise UsageError(f"--convention: {value!r} is not one of {', '.join(choices)}")
        opts.declared["convention"] = value
    elif flag == "--peak-tflops":
        # FLOP/s per GPU, from TFLOP/s: 989.5 -> 9.895e14
        opts.declared["peak_flops"] = parse_amount(flag, value) * 1e12
    elif flag == "--peak-source":
        if not value.strip():
            raise UsageError("--peak-source: say where the peak comes from (a datasheet line)")
        opts.notes["peak_flops"] = value.strip()
    elif flag == "--name":
        if not value.strip():
            raise UsageError("--name: the name is empty")
        opts.name = value
    elif flag == "--gpus":
        if not re.fullmatch(r"\s*[\w-]+(\s*,\s*[\w-]+)*\s*", value):
            raise UsageError(f"--gpus: {value!r} is not a list of GPU indices or UUIDs (0,1)")
        opts.gpus = value.replace(" ", "")
    elif flag == "--run-id":
        if not re.fullmatch(r"[\w.:@+-]{1,200}", value):
            raise UsageError(f"--run-id: {value!r} is not an id (letters, digits, . _ - : @ +)")
        opts.run_id = value
    elif flag == "--metrics-addr":
        opts.metrics_addr = parse_addr(flag, value)
    elif flag == "--notify":
        if not re.match(r"https?://[^/\s]+", value):
            raise UsageError("--notify: not an http:// or https:// URL")  # the URL is not echoed
        opts.notify.append(value)
    elif flag == "--port":
        port = port_number(value)
        if port is None:
            raise UsageError(f"--port: {value!r} is not a port number (0 for any free port)")
        opts.port = port


def parse_run_args(argv: list[str], python: str | None = None) -> RunOptions:
    """Options up to the script (or `--`), then the command. Raises `UsageError`."""
    python = python or sys.executable
    opts = RunOptions()
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            opts.command = list(argv[i + 1 :])
            if not opts.command:
                raise UsageError("nothing to run after '--'")
            break
        if arg in ("-h", "--help"):
            opts.show = "help"
            return opts
        if arg == "--version":
            opts.show = "version"
            return opts
        if arg == "-m":
            if i + 1 >= len(argv):
                raise UsageError("-m: which module? (tm -m package.module args)")
            opts.command = [python, "-m", *argv[i + 1 :]]
            break
        if not arg.startswith("-") or arg == "-":
            if is_python_script(arg):
                opts.script = arg
                opts.command = [python, *argv[i:]]
            elif find_program(arg) is not None:
                opts.command = list(argv[i:])  # `tm python train.py`: as after `--`
            else:
                raise UsageError(
                    f"{arg}: not a tm command, a Python script or a program on PATH "
                    "(see tm --help)"
                )
            break
        flag, eq, inline = arg.partition("=")
        if flag in ("-q", "--quiet") and not eq:
            opts.quiet = True
        elif flag in _SWITCHES and not eq:
            setattr(opts, _SWITCHES[flag], False)
        elif flag in _FACT_FLAGS or flag in _VALUE_FLAGS:
            if eq:
                value = inline
            elif i + 1 < len(argv):
                i += 1
                value = argv[i]
            else:
                raise UsageError(f"{flag}: needs a value")
            _parse_value_flag(opts, flag, value)
        else:
            raise UsageError(f"unknown option {arg!r} (options go before the script; see tm --help)")
        i += 1
    if not opts.command:
        raise UsageError("nothing to run: tm script.py [args], or tm [options] -- command")
    if ("peak_flops" in opts.declared) != ("peak_flops" in opts.notes):
        raise UsageError("--peak-tflops and --peak-source go together: say where the peak is from")
    return opts
