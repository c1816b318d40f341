"""The wire schema: what a reader accepts, what it refuses and why, and what is redacted."""

from __future__ import annotations

import json
import math

import pytest

from trainmeter import records


def _record(**over):
    base = records.make("step", {"k": 1, "tokens": 512, "n": 1}, t=12.5, src="agent", rank=0, pid=7)
    base.update(over)
    return base


def test_round_trip_keeps_every_field() -> None:
    rec = _record()
    line = records.encode(rec)
    assert "\n" not in line
    assert records.decode(line) == rec
    assert records.decode(line.encode()) == rec


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nan_and_infinity_are_refused_on_the_way_out(bad: float) -> None:
    with pytest.raises(records.RecordError):
        records.encode(_record(d={"value": bad}))


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_refused_on_the_way_in(token: str) -> None:
    line = records.encode(_record()).replace('"tokens":512', f'"tokens":{token}')
    with pytest.raises(records.RecordError, match="not a number"):
        records.decode(line)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"kind": "steps"}, "unknown kind 'steps'"),
        ({"v": 2}, "schema version 2"),
        ({"v": None}, "schema version None"),
        ({"t": "soon"}, "t is not a finite number"),
        ({"t": True}, "t is not a finite number"),
        ({"d": [1]}, "d is not an object"),
        ({"rank": "0"}, "rank is not an integer"),
    ],
)
def test_bad_envelopes_are_refused_with_a_reason(change: dict, reason: str) -> None:
    line = json.dumps(_record(**change))
    with pytest.raises(records.RecordError, match=reason):
        records.decode(line)


@pytest.mark.parametrize("line", ["", "   ", "{not json", "[1, 2]", b"\xff\xfe"])
def test_garbage_is_refused(line) -> None:
    with pytest.raises(records.RecordError):
        records.decode(line)


def test_every_kind_of_the_contract_is_known() -> None:
    assert records.KINDS == {
        "run.start", "hello", "fact", "step", "metric", "phase", "comm",
        "sample.gpu", "sample.host", "sample.node", "alert", "memory", "crash", "run.end",
    }


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--api-key", "sk-123", "--lr", "3"], ["--api-key", "<redacted>", "--lr", "3"]),
        (["--hf_token=hf_abc"], ["--hf_token=<redacted>"]),
        (["--password=hunter2"], ["--password=<redacted>"]),
        (["--wandb-api-key", "x"], ["--wandb-api-key", "<redacted>"]),
        (["--secret", "s"], ["--secret", "<redacted>"]),
        (["WANDB_API_KEY=abc", "python"], ["WANDB_API_KEY=<redacted>", "python"]),
        (["--max-tokens", "512"], ["--max-tokens", "512"]),
        (["--max_new_tokens=64"], ["--max_new_tokens=64"]),
        (["--tokens-per-step", "4096"], ["--tokens-per-step", "4096"]),
        (["--tokenizer", "gpt2"], ["--tokenizer", "gpt2"]),
        (["train.py", "--steps", "10"], ["train.py", "--steps", "10"]),
    ],
)
def test_redaction_hides_secrets_and_keeps_counts(argv: list[str], expected: list[str]) -> None:
    assert records.redact_argv(argv) == expected


def test_redaction_does_not_change_its_input() -> None:
    argv = ["--token", "abc"]
    records.redact_argv(argv)
    assert argv == ["--token", "abc"]
