"""The counted FLOPs against the model's formula, and the operators the count could not see.

Shape: N = 1,000, E = 0, L = 2, d = 8, T = 4, so L·d·T = 64 and
  titan = 6 x 1,000 + 12 x 64 = 6,768; megatron = 6,000 + 6 x 64 = 6,384; hf = 6,000;
  all_params = 6,768.
A Mixtral whose experts the count missed read 0.37x its formula: outside 1/2..2, warned.
"""

from __future__ import annotations

import pytest

from trainmeter.engine import Engine

from .build import fact, hello, start, steps

SHAPE = {"n_params": 1000, "n_embedding_params": 0, "n_layers": 2, "d_model": 8, "seq_len": 4}


def _snap(counted: float, convention: str | None = None, missing=None) -> dict:
    engine = Engine()
    records = [start(), hello(0.1, probes=("steps", "flops"))]
    records += [fact(0.2, key, value) for key, value in SHAPE.items()]
    if convention:
        records.append(fact(0.2, "convention", convention, "declared"))
    records.append(fact(0.3, "counted_flops_per_token", counted, "measured"))
    if missing:
        records.append(fact(0.3, "counted_missing_ops", missing, "measured"))
    records += steps(1.0, 0.5, 6, tokens=16)
    for record in records:
        engine.feed(record)
    return engine.snapshot()


def _mismatch(snap: dict) -> list[str]:
    return [w for w in snap["warnings"] if "formula's" in w]


def test_a_count_far_below_the_chosen_formula_is_warned_about():
    snap = _snap(2500.0, "titan")
    ratio = snap["counted"]["formula_ratio"]
    assert ratio["convention"] == "titan"
    assert ratio["ratio"] == pytest.approx(2500 / 6768)
    assert ratio["factor"] == 2.0
    (warning,) = _mismatch(snap)
    assert "0.37x the titan formula's" in warning


def test_recompute_is_within_the_factor():
    # activation recompute: about 8/6 of the formula
    snap = _snap(6768 * 8 / 6, "titan")
    assert snap["counted"]["formula_ratio"]["ratio"] == pytest.approx(4 / 3)
    assert _mismatch(snap) == []


def test_with_no_convention_the_nearest_one_is_compared():
    snap = _snap(2500.0)
    ratio = snap["counted"]["formula_ratio"]
    assert ratio["convention"] == "nearest (hf)"
    assert ratio["ratio"] == pytest.approx(2500 / 6000)
    assert len(_mismatch(snap)) == 1
    near = _snap(6500.0)
    assert near["counted"]["formula_ratio"]["convention"] == "nearest (megatron)"
    assert _mismatch(near) == []


def test_operators_without_a_formula_are_named_in_the_snapshot_and_a_warning():
    snap = _snap(6768.0, "titan", missing=["aten._cudnn_rnn", "flash_attn._flash_attn_forward"])
    assert snap["counted"]["missing_ops"] == ["aten._cudnn_rnn", "flash_attn._flash_attn_forward"]
    (warning,) = [w for w in snap["warnings"] if "no FLOP formula" in w]
    assert "aten._cudnn_rnn, flash_attn._flash_attn_forward" in warning
    assert "missing_ops" not in _snap(6768.0, "titan")["counted"]
