"""Whether a well-formed record can be true: the ranges `tm` believes.

The wire schema (`records.validate`) checks the envelope; this checks the values a record
claims. A buggy or forged record (a `step` of 10^30 optimizer steps, a trillion-trillion
tokens, a negative count, a number that overflowed to infinity) would otherwise be summed into
every number the run shows. Such a record is skipped and counted with its reason; the limits
are far above any real training (a million optimizer steps reported at once, 10^12 tokens in
one record) so a true record is never refused.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs milliseconds before the child starts
if TYPE_CHECKING:
    from typing import Any

#: More optimizer steps than this in one `step` record cannot be true.
MAX_STEPS_PER_RECORD = 1_000_000
#: More tokens than this in one `step` record cannot be true.
MAX_TOKENS_PER_RECORD = 10**12

#: Declared or detected facts that are counts or amounts: never negative.
NON_NEGATIVE_FACTS = frozenset(
    {
        "tokens_per_step",
        "flops_per_token",
        "n_params",
        "n_embedding_params",
        "n_frozen_params",
        "n_layers",
        "d_model",
        "seq_len",
        "dp",
        "moe_experts",
        "moe_top_k",
        "moe_routed_params",
        "moe_router_params",
        "moe_shared_params",
        "n_lookup_params",
        "n_vector_params",
        "attn_width",
        "segment_len",
        "budget_tokens",
        "budget_steps",
        "budget_flops",
        "plan_mfu",
        "plan_hours",
        "peak_flops",
        "counted_flops_per_token",
        "counted_flops_per_step",
        "agent_dropped_records",
        "ingest_dropped",
    }
)


class Implausible(ValueError):
    """A record that is well formed but cannot be true. The message's first part is the reason."""


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _all_finite(d: dict[str, Any]) -> bool:
    """Every number anywhere in `d` is finite (JSON's 1e400 parses as infinity).

    The flat dict of a `step` or `metric` (most records) takes the first loop only; nested
    values (GPU rows) go through an explicit stack, so no depth can overflow.
    """
    nested: list[Any] = []
    for value in d.values():
        kind = type(value)
        if kind is float:
            if value - value != 0.0:  # inf - inf and nan - nan are nan
                return False
        elif kind is dict or kind is list:
            nested.append(value)
    while nested:
        item = nested.pop()
        for value in item.values() if type(item) is dict else item:
            kind = type(value)
            if kind is float:
                if value - value != 0.0:
                    return False
            elif kind is dict or kind is list:
                nested.append(value)
    return True


def _in_range(kind: str, d: dict[str, Any], name: str, high: float | None = None) -> None:
    """`d[name]`, when present, is a number in [0, high]."""
    value = d.get(name)
    if value is None:
        return
    if not _number(value):
        raise Implausible(f"implausible {kind}: {name} is not a number")
    if value < 0:
        raise Implausible(f"implausible {kind}: {name}={value!r} is negative")
    if high is not None and value > high:
        raise Implausible(f"implausible {kind}: {name}={value!r} is above {high:g}")


#: A record's time lies in the run: from `run.start` (less this, for clock rounding) ...
BEFORE_START_S = 1.0
#: ... to no later than this after it (a year: far past any real run, far short of 1e300).
MAX_RUN_S = 366 * 86400.0


def in_run(kind: str, t: float, t_start: float | None, horizon: float) -> None:
    """A record at `t` of a run that started at `t_start` (None: not known yet) cannot lie
    before it or past `horizon` (the present, for records arriving live). Raises `Implausible`."""
    if t_start is not None and t < t_start - BEFORE_START_S:
        raise Implausible(f"implausible {kind}: t={t!r} is before run.start")
    if t > horizon or t_start is not None and t > t_start + MAX_RUN_S:
        raise Implausible(f"implausible {kind}: t={t!r} is after the run")


def _whole(kind: str, d: dict[str, Any], names: tuple[str, ...]) -> None:
    """Counts are whole numbers: `k=1.5` optimizer steps or `tokens=2.5` cannot be true
    (`tokens=1000.0` is whole: a writer that sends floats for counts is believed)."""
    for name in names:
        value = d.get(name)
        if value is not None and _number(value) and not float(value).is_integer():
            raise Implausible(f"implausible {kind}: {name}={value!r} is not a whole number")


STEP_COUNTS = ("k", "tokens", "real_tokens", "n", "micro")


def _step(d: dict[str, Any]) -> None:
    k, tokens, real = d.get("k"), d.get("tokens"), d.get("real_tokens")
    if (
        type(k) is int
        and 0 <= k <= MAX_STEPS_PER_RECORD
        and type(tokens) is int
        and 0 <= tokens <= MAX_TOKENS_PER_RECORD
        and real is None
        and type(d.get("n", 0)) is int
        and d.get("n", 0) >= 0
        and type(d.get("micro", 0)) is int
        and d.get("micro", 0) >= 0
    ):
        return  # the agent's usual record: whole numbers, all in range
    _in_range("step", d, "k", MAX_STEPS_PER_RECORD)
    _in_range("step", d, "tokens", MAX_TOKENS_PER_RECORD)
    _in_range("step", d, "real_tokens", MAX_TOKENS_PER_RECORD)
    _in_range("step", d, "n")
    _in_range("step", d, "micro")
    _whole("step", d, STEP_COUNTS)
    if _number(tokens) and _number(real) and real > tokens:
        raise Implausible("implausible step: more real tokens than tokens")


def _phase(d: dict[str, Any]) -> None:
    _in_range("phase", d, "s")
    _in_range("phase", d, "n")


def _fact(d: dict[str, Any]) -> None:
    if d.get("key") in NON_NEGATIVE_FACTS and _number(d.get("value")) and d["value"] < 0:
        raise Implausible(f"implausible fact: {d['key']}={d['value']!r} is negative")


def _comm(d: dict[str, Any]) -> None:
    _in_range("comm", d, "k", MAX_STEPS_PER_RECORD)
    for name in ("n", "s", "spans_s", "calls"):
        _in_range("comm", d, name)
    _whole("comm", d, ("k", "n", "calls"))
    if _number(d.get("s")) and _number(d.get("spans_s")) and d["spans_s"] > d["s"]:
        raise Implausible("implausible comm: more wait in spans than wait")


_BY_KIND = {"step": _step, "phase": _phase, "fact": _fact, "comm": _comm}


def check(record: dict[str, Any]) -> None:
    """Raise `Implausible` when `record` (already valid on the wire) cannot be true."""
    kind = record["kind"]
    if record["t"] < 0:
        raise Implausible(f"implausible {kind}: t={record['t']!r} is before the clock started")
    rank = record.get("rank")
    if rank is not None and rank < 0:
        raise Implausible(f"implausible {kind}: rank {rank} is negative")
    pid = record.get("pid")
    if pid is not None and (not isinstance(pid, int) or isinstance(pid, bool) or pid < 0):
        raise Implausible(f"implausible {kind}: pid {pid!r} is not a process id")
    d = record["d"]
    if not _all_finite(d):
        raise Implausible(f"implausible {kind}: a number is not finite")
    rule = _BY_KIND.get(kind)
    if rule is not None:
        rule(d)
