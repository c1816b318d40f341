"""The summary's FLOPs block shows a mixture of experts' active parameters beside its total."""

from __future__ import annotations

from trainmeter.views import summary_speed


def test_active_parameters_are_shown_beside_the_total():
    snap = {
        "conventions": {"titan": 9.4e9},
        "flops_per_token": {
            "value": 9.4e9, "convention": "titan", "params": {"total": 7e9, "active": 1.4e9},
        },
    }
    lines = [str(x) for x in summary_speed.flops(snap)[1:]]
    assert "mixture of experts: 1.4B parameters active per token, of 7.0B in all" in lines
    del snap["flops_per_token"]["params"]
    assert not any("mixture" in str(x) for x in summary_speed.flops(snap)[1:])
