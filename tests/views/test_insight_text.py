"""The text lines of samples, the waterfall and advice, from hand-built snapshots."""

from __future__ import annotations

from trainmeter.views.insight_text import advice_lines, insight_lines, waterfall_lines


def test_waterfall_lines_show_each_factor_and_the_running_level():
    wf = {
        "convention": "hf",
        "value": 0.25,
        "factors": [
            {"name": "time_outside_window", "label": "Startup", "value": 0.5, "scope": "run"},
            {"name": "gpu_idle", "label": "Idle", "value": 0.983, "loss": 0.017, "scope": "steps"},
            {"name": "model_vs_executed", "label": "Gap", "value": 0.5, "scope": "steps",
             "above_one": None},
        ],
        "whole_run": {"value": 0.125},
        "absent": {"tensor_share": "no GPM"},
    }
    text = "\n".join(waterfall_lines({"waterfall": wf}))
    # 0.5 -> 50.0% of the whole run; the steps restart at 100%: 0.983 -> 98.3%, x 0.5 -> 49.1%
    # (0.983 x 0.5 is 0.49149999... as stored: the tie rounds down, as on the page)
    # a factor reads as the page writes it (amount(..., "factor"), format.js the same): ×0.5,
    # and 0.983 "×1.0" by the rule, so what it takes off the level is beside it, as on the page
    assert "  ×0.5        Startup  -> 50.0%" in text
    assert "  ×1.0 −1.7%  Idle     -> 98.3%" in text
    assert "  ×0.5        Gap      -> 49.1%" in text
    assert "= MFU 25.0% (hf)" in text
    assert "over the whole run (window / elapsed x MFU): 12.5%" in text
    assert "absent tensor_share: no GPM" in text


def test_missing_parts_give_no_lines():
    assert insight_lines({}) == []
    assert advice_lines({"advice": []}) == []


def test_advice_lines_carry_the_message():
    lines = advice_lines({"advice": [{"kind": "padding", "message": "30% padding"}]})
    assert lines == ["what to try:", "  - 30% padding"]
