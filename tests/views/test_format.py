"""One value reads one way in every view: the examples that used to print three ways."""

from __future__ import annotations

import math

import pytest

from trainmeter.views import format as f
from trainmeter.views.compare import _pct as compare_pct
from trainmeter.views.insight_text import _pct as insight_pct
from trainmeter.views.insight_text import _si as insight_si
from trainmeter.views.passport_md import fmt as passport_fmt


def test_the_three_examples_read_one_way() -> None:
    # 0.0042 was "0.4%" or "0.42%"; 1.234e15 "1.2P" or "1.23P"; 7503 s "2h05m" or "2h05m03s"
    assert f.percent(0.0042) == "0.4%"
    assert passport_fmt(0.0042, "fraction") == compare_pct(0.0042) == insight_pct(0.0042) == "0.4%"
    assert f.si(1.234e15) == insight_si(1.234e15) == "1.2P"
    assert f.duration(7503) == passport_fmt(7503, "s") == "2h05m"


@pytest.mark.parametrize(
    ("fraction", "text"),
    [(0.5, "50.0%"), (0.378979, "37.9%"), (0.001, "0.1%"), (0.00042, "0.042%"), (0.0, "0.0%"),
     (2.364e-05, "0.0024%")],
)
def test_percent_one_decimal_and_a_tiny_one_never_zero(fraction: float, text: str) -> None:
    assert f.percent(fraction) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [(1_234_567, "1.2M"), (35_123, "35.1k"), (123_456, "123k"), (950, "950"), (0.5, "0.5"),
     (5e9, "5.0B"), (None, "?"), (math.nan, "?")],
)
def test_si_at_most_three_significant_digits(value, text: str) -> None:
    assert f.si(value) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(12.34, "12.3s"), (303, "5m03s"), (3725, "1h02m"), (200_000, "2d07h"), (0.0123, "12ms"),
     (None, "?")],
)
def test_duration_steps_up_its_units(seconds, text: str) -> None:
    assert f.duration(seconds) == text


def test_the_run_list_writes_durations_the_same_way() -> None:
    from trainmeter.cli.runs import _duration

    assert _duration(7503) == "2h05m" and _duration(None) == "-"
