"""Provenance: the most trusted source wins, and a disagreement is kept and shown."""

from __future__ import annotations

from trainmeter.engine.facts import PRECEDENCE, FactStore

from .build import fact, run, start


def test_precedence_order():
    assert PRECEDENCE == ("declared", "emitted", "tapped", "detected", "measured", "assumed")


def test_most_trusted_wins_whatever_the_order():
    store = FactStore()
    store.offer("n_layers", 12, "declared")
    store.offer("n_layers", 24, "detected")  # arrives later, less trusted
    assert store.get("n_layers").value == 12
    store.offer("seq_len", 512, "assumed")
    store.offer("seq_len", 1024, "tapped")
    assert store.get("seq_len").source == "tapped"


def test_latest_from_the_same_source_replaces():
    store = FactStore()
    store.offer("dp", 2, "detected")
    store.offer("dp", 4, "detected")
    assert store.value("dp") == 4 and store.conflicts("dp") == []


def test_conflicts_kept_and_equal_values_are_not_conflicts():
    store = FactStore()
    store.offer("n_params", 1_000_000, "declared", "from --params")
    store.offer("n_params", 1_000_000.0, "detected")  # same number: no conflict
    store.offer("n_params", 999_000, "measured")
    snap = store.snapshot()["n_params"]
    assert snap == {
        "value": 1_000_000,
        "source": "declared",
        "note": "from --params",
        "conflicts": [{"value": 999_000, "source": "measured"}],
    }


def test_engine_facts_and_warning_on_conflict():
    snap = run(start(0.0, n_layers=12), fact(1.0, "n_layers", 24, "detected"))
    assert snap["facts"]["n_layers"]["value"] == 12
    assert snap["facts"]["n_layers"]["conflicts"] == [{"value": 24, "source": "detected"}]
    assert any("n_layers" in w and "declared" in w for w in snap["warnings"])


def test_declared_peak_source_is_the_note():
    snap = run(start(0.0, peak_flops=8e14, peak_source="our matmul benchmark"))
    assert snap["facts"]["peak_flops"]["note"] == "our matmul benchmark"
    assert "peak_source" not in snap["facts"]


def test_declared_notes_of_run_start_carry_the_peak_source():
    """`tm` writes the peak's source in run.start's `declared_notes`, beside `declared`."""
    record = start(0.0, peak_flops=8e14)
    record["d"]["declared_notes"] = {"peak_flops": "vendor quote 2026"}
    snap = run(record)
    assert snap["facts"]["peak_flops"]["note"] == "vendor quote 2026"
