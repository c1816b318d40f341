"""The MFU waterfall in the Prometheus exposition: one gauge, a `factor` label, the convention."""

from __future__ import annotations

import math

import pytest
from prometheus_client.parser import text_string_to_metric_families

from trainmeter.exporters.prometheus import render


def factor(name, value, scope="steps", **extra):
    return {"name": name, "value": value, "loss": 1 - value, "scope": scope, **extra}


# Worked by hand: the steps factors 0.8 x 0.5 x 0.75 x 0.9 x 0.5 = 0.135 = the MFU;
# with the run factor 0.6 in front, 0.6 x 0.135 = 0.081 (whole_run).
SNAP = {
    "mfu": {"value": 0.135, "convention": "megatron"},
    "waterfall": {
        "start": 1.0,
        "value": 0.135,
        "convention": "megatron",
        "factors": [
            factor("time_outside_window", 0.6, scope="run"),
            factor("time_outside_steps", 0.8),
            factor("gpu_idle", 0.5),
            factor("tensor_share", 0.75),
            factor("clocks", 0.9),
            factor("model_vs_executed", 0.5),
        ],
        "absent": {},
        "whole_run": {"value": 0.081},
    },
    "job": {"run_id": "job7", "node_rank": 0, "nodes": 1},
}


def samples(body: bytes, name: str) -> list[tuple[dict[str, str], float]]:
    return [
        (s.labels, s.value)
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
        if s.name == name
    ]


def test_each_factor_is_a_sample_labelled_with_its_name_scope_and_convention():
    body, _ = render(SNAP)
    got = samples(body, "trainmeter_mfu_waterfall_factor")
    by_name = {labels["factor"]: (labels, value) for labels, value in got}
    assert list(by_name) == [f["name"] for f in SNAP["waterfall"]["factors"]]  # in chain order
    for labels, _ in by_name.values():
        assert labels["convention"] == "megatron"
        assert labels["run"] == "job7" and labels["node"] == "0"
    assert by_name["time_outside_window"][0]["scope"] == "run"
    assert by_name["gpu_idle"][1] == 0.5
    steps = [v for labels, v in got if labels["scope"] == "steps"]
    # a PromQL user multiplies them back to the MFU: 0.8 x 0.5 x 0.75 x 0.9 x 0.5 = 0.135
    assert math.prod(steps) == pytest.approx(0.135)
    [(_, mfu)] = samples(body, "trainmeter_mfu_ratio")
    assert math.prod(steps) == pytest.approx(mfu)
    [(labels, whole)] = samples(body, "trainmeter_mfu_waterfall_whole_run_ratio")
    assert whole == 0.081 and labels["convention"] == "megatron"


def test_an_absent_factor_has_no_sample_and_a_factor_above_one_is_not_clipped():
    snap = {
        "mfu": {"value": 0.3, "convention": "megatron"},
        "waterfall": {
            "value": 0.3,
            "convention": "megatron",
            # no GPM (an A100): tensor_share absent, its loss inside model_vs_executed
            # 0.9 x 1.25 x (0.3 / (0.9 x 1.25) = 0.26667) = 0.3
            "factors": [
                factor("time_outside_steps", 0.9),
                factor("gpu_idle", 1.25, above_one="the GPU worked through the data wait"),
                factor("model_vs_executed", 0.3 / (0.9 * 1.25), merged=["tensor_share", "clocks"]),
            ],
            "absent": {"tensor_share": "no GPM", "clocks": "no tensor clock"},
        },
    }
    body, _ = render(snap)
    got = {
        labels["factor"]: (labels, v)
        for labels, v in samples(body, "trainmeter_mfu_waterfall_factor")
    }
    assert set(got) == {"time_outside_steps", "gpu_idle", "model_vs_executed"}
    assert got["gpu_idle"][1] == 1.25  # above 1, as the engine gives it
    assert got["model_vs_executed"][0]["merged"] == "tensor_share,clocks"
    assert math.prod(v for _, v in got.values()) == pytest.approx(0.3)
    assert not samples(body, "trainmeter_mfu_waterfall_whole_run_ratio")  # absent, not 0


def test_no_waterfall_no_family():
    body, _ = render({"mfu": {"value": 0.2, "convention": "megatron"}})
    assert b"waterfall" not in body
