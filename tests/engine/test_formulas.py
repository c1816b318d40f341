"""The formulas, each against a value worked out by hand."""

from __future__ import annotations

import pytest

from trainmeter.engine.formulas import (
    MovingAverage,
    arithmetic_intensity,
    eta_seconds,
    mfu,
    num,
    ofu,
)


def test_mfu():
    # 6e9 FLOP/token x 100,000 tok/s = 6e14 FLOP/s over 2 x 1e15 = 0.3
    assert mfu(6e9, 1e5, 2, 1e15) == pytest.approx(0.3)


def test_ofu_with_tensor_clock():
    # H100 SXM: tensor clock 1830 MHz. At SM clock 1980 (above it): 0.5 x 1830/1830 = 0.5
    assert ofu(0.5, 1980, 1830, 1980) == (0.5, True)
    # Clocked down to 1464 MHz: 0.5 x 1464 / 1830 = 0.4
    value, comparable = ofu(0.5, 1464, 1830, 1980)
    assert value == pytest.approx(0.4) and comparable


def test_ofu_without_tensor_clock_scales_to_max_sm_clock_and_is_not_comparable():
    # 0.6 x 990 / 1980 = 0.3
    value, comparable = ofu(0.6, 990, None, 1980)
    assert value == pytest.approx(0.3) and comparable is False
    assert ofu(0.6, 990, None, None) is None


def test_arithmetic_intensity():
    # ridge 295.37 FLOP/B x MFU 0.4 / DRAM active 0.5 = 236.3 FLOP/B
    assert arithmetic_intensity(295.37, 0.4, 0.5) == pytest.approx(236.296)


def test_eta():
    # 1,000,000 tokens left at 2,500 tok/s = 400 s; a met budget is 0, never negative
    assert eta_seconds(1_000_000, 2500) == 400
    assert eta_seconds(-5, 2500) == 0


def test_moving_average_skips_warmup():
    avg = MovingAverage(alpha=0.5, skip=2)
    avg.update(1.0)
    avg.update(1000.0)  # compile warm-up: both ignored
    assert avg.value is None
    avg.update(10.0)
    assert avg.value == 10.0
    avg.update(20.0)  # 10 + 0.5 x (20 - 10) = 15
    assert avg.value == 15.0


def test_num_refuses_non_finite_and_bools():
    assert num(3) == 3.0 and num(2.5) == 2.5
    assert num(float("nan")) is None and num(float("inf")) is None
    assert num(True) is None and num("3") is None
