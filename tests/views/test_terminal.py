"""The terminal views: SI units, durations, MFU always with its convention."""

from __future__ import annotations

import pytest

from trainmeter.views.terminal import duration, mfu_text, si, summary_line, summary_text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1_234_567, "1.2M"),
        (35_123, "35.1k"),
        (123_456, "123k"),
        (999_960, "1.0M"),  # rounds up into the next unit, never "1000k"
        (950, "950"),
        (20_000_000_000, "20.0B"),
        (0.5, "0.5"),
        (0, "0"),
        (None, "?"),
    ],
)
def test_si(value, text: str) -> None:
    assert si(value) == text


@pytest.mark.parametrize(
    ("seconds", "text"), [(12.34, "12.3s"), (303, "5m03s"), (7500, "2h05m"), (-1, "0.0s")]
)
def test_duration(seconds: float, text: str) -> None:
    assert duration(seconds) == text


def test_mfu_is_named_or_a_range_never_bare() -> None:
    assert mfu_text({"mfu": {"value": 0.3812, "convention": "titan"}}) == "MFU 38.1% (titan)"
    assert mfu_text({"mfu": {"range": [0.368, 0.422]}}) == "MFU 36.8-42.2% by convention"
    # a CPU run against a declared GPU peak: tiny, but not shown as zero
    assert mfu_text({"mfu": {"range": [3.64e-8, 4.36e-8]}}) == "MFU 3.6e-06-4.4e-06% by convention"
    assert mfu_text({"mfu": {"value": 0.0004, "convention": "hf"}}) == "MFU 0.04% (hf)"
    assert mfu_text({"absent": {"mfu": "no peak"}}) is None


def test_summary_line() -> None:
    snap = {
        "steps": 100,
        "tokens_seen": 1_234_567,
        "tokens_per_s": 35_123.0,
        "mfu": {"value": 0.381, "convention": "megatron"},
        "time": {"elapsed_s": 35.2},
    }
    assert summary_line(snap, "/r/x") == (
        "trainmeter: 35.2s, 100 steps, 1.2M tokens, 35.1k tok/s, MFU 38.1% (megatron); run /r/x"
    )
    # no engine numbers at all: the elapsed time tm measured itself, and where the log is not
    assert summary_line({}, None, elapsed_s=2.0) == "trainmeter: 2.0s; no run log"


def test_summary_text_shows_time_split_goodput_warnings_and_reasons() -> None:
    snap = {
        "steps": 10,
        "tokens_seen": 10_240,
        "tokens_per_s": 2048.0,
        "step_time_s": 0.5,
        "progress": 0.25,
        "time": {
            "elapsed_s": 10.0,
            "goodput": 0.8,
            "parts": [
                {"name": "startup", "label": "Startup and compile", "s": 2.0},
                {"name": "data", "label": "Data wait", "s": None},
            ],
        },
        "series": {"train_loss": {"value": 2.345678, "count": 10, "via": "emit"}},
        "warnings": ["tokens disagree"],
        "absent": {"mfu": "no dense peak"},
    }
    text = summary_text(snap, "runs/a")
    assert text.splitlines() == [
        "run runs/a",
        "10 steps, 10.2k tokens, 2.0k tok/s, 500.0 ms/step, 25.0% of budget",
        "MFU absent: no dense peak",
        "time: 10.0s elapsed, goodput 80.0%",
        "  Startup and compile: 2.0s",
        "  Data wait: not measured",
        "series (last value):",
        "  train_loss = 2.346  (10 values, emit)",
        "warning: tokens disagree",
        "absent:",
        "  mfu: no dense peak",
    ]
