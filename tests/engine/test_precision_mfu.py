"""MFU stays against the dense BF16 peak; the precision is said beside it, and the utilization
against that precision's own dense peak when the card's datasheet gives one."""

from __future__ import annotations

import pytest

from .build import device, fact, hello, run, start, steps
from .test_budget import SHAPE

MI300X = "AMD Instinct MI300X"


def one_gpu(name: str, precision: str | None, note: str = "autocast on cuda"):
    # the reference shape under hf: 5,831,346,816 FLOP/token; 100,000 tok/s on one GPU
    records = [
        start(0.0, convention="hf", **SHAPE), hello(0.1), device(0.2, name=name),
        steps(1.0, 1.0, 6, tokens=100_000),
    ]
    if precision is not None:
        records.append(fact(0.3, "matmul_precision", precision, note=note))
    return run(records)


def test_fp8_on_mi300x_mfu_against_bf16_and_utilization_against_fp8():
    # MFU   = 5,831,346,816 x 1e5 / 1307.4e12 = 0.446026
    # at fp8 = 5,831,346,816 x 1e5 / 2614.9e12 = 0.223005 (labelled, not MFU)
    mfu = one_gpu(MI300X, "fp8", "torchao Float8Linear layers")["mfu"]
    assert mfu["value"] == pytest.approx(0.446026, rel=1e-5)
    assert mfu["precision"] == "fp8" and mfu["precision_note"] == "torchao Float8Linear layers"
    at = mfu["at_precision"]
    assert at["value"] == pytest.approx(0.223005, rel=1e-5)
    assert at["peak_flops"] == pytest.approx(2614.9e12)
    assert "Matrix FP8" in at["peak_source"] and "not MFU" in at["label"]


def test_bf16_has_no_second_number_and_unknown_precision_says_so():
    mfu = one_gpu(MI300X, "bf16")["mfu"]
    assert mfu["precision"] == "bf16" and "at_precision" not in mfu
    mfu = one_gpu(MI300X, None)["mfu"]
    assert mfu["precision"] is None and "not detected" in mfu["precision_note"]


def test_fp32_on_a_card_without_an_fp32_line_is_said_not_hidden():
    # H100 SXM's spec gives only its BF16 line: MFU against it, and the note says fp32
    mfu = one_gpu("NVIDIA H100 80GB HBM3", "fp32", "weights in torch.float32, no autocast")["mfu"]
    assert mfu["value"] == pytest.approx(5_831_346_816 * 1e5 / 989.5e12)
    assert mfu["precision"] == "fp32" and "at_precision" not in mfu
    assert "no FP32 dense peak" in mfu["precision_note"]


def test_the_precision_is_printed_next_to_mfu():
    from trainmeter.views.terminal import mfu_text

    assert mfu_text(one_gpu(MI300X, "fp8")) == "MFU 44.6% (hf, fp8)"
    assert mfu_text(one_gpu(MI300X, None)) == "MFU 44.6% (hf)"
