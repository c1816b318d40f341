"""The summary's MFU block says the matmuls' precision and, beside MFU, the utilization against
that precision's own dense peak."""

from __future__ import annotations

from trainmeter.views import summary_speed


def snap(**mfu):
    return {"mfu": {"value": 0.446, "convention": "hf", "n_gpus": 1, "peak": "AMD Instinct MI300X",
                    "peak_label": "datasheet", **mfu}}


def test_fp8_utilization_is_shown_labelled_beside_mfu():
    at = {
        "value": 0.223,
        "precision": "fp8",
        "label": "utilization against the dense FP8 peak (not MFU)",
    }
    lines = [str(x) for x in summary_speed.mfu(snap(precision="fp8", at_precision=at))]
    assert lines[0] == "MFU 44.6% (hf, fp8)"
    assert "22.3% utilization against the dense FP8 peak (not MFU)" in lines


def test_a_precision_without_its_peak_says_why():
    note = "weights in torch.float32; no FP32 dense peak in its datasheet line"
    lines = [str(x) for x in summary_speed.mfu(snap(precision="fp32", precision_note=note))]
    assert lines[0] == "MFU 44.6% (hf, fp32)"
    assert f"fp32: {note}" in lines
    assert [str(x) for x in summary_speed.mfu(snap())][0] == "MFU 44.6% (hf)"
