"""The terminal views: SI units, durations, MFU always with its convention."""

from __future__ import annotations

import pytest

from trainmeter.views.format import duration, si
from trainmeter.views.summary_blocks import time_bar
from trainmeter.views.terminal import mfu_text, summary_line
from trainmeter.views.terminal_summary import summary_text


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
    ("seconds", "text"), [(12.34, "12.3 s"), (303, "5m03s"), (7500, "2h05m"), (-1, "0 s")]
)
def test_duration(seconds: float, text: str) -> None:
    assert duration(seconds) == text


def test_mfu_is_named_or_a_range_never_bare() -> None:
    assert mfu_text({"mfu": {"value": 0.3812, "convention": "titan"}}) == "MFU 38.1% (titan)"
    assert mfu_text({"mfu": {"range": [0.368, 0.422]}}) == "MFU 36.8-42.2% by convention"
    # a CPU run against a declared GPU peak: tiny, but not shown as zero
    assert mfu_text({"mfu": {"range": [3.64e-8, 4.36e-8]}}) == "MFU 3.6e-6-4.4e-6% by convention"
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
        "trainmeter: 35.2 s, 100 steps, 1.2M tokens, 35.1k tok/s, MFU 38.1% (megatron); run /r/x"
    )
    # OFU where the counters gave it, the last training loss, and how many alerts fired
    snap.update(
        ofu={"value": 0.4237},
        series={"train_loss": {"value": 2.34567}, "lr": {"value": 1e-4}},
        alerts=[{"kind": "straggler"}, {"kind": "mfu_impossible"}],
    )
    assert summary_line(snap, "/r/x") == (
        "trainmeter: 35.2 s, 100 steps, 1.2M tokens, 35.1k tok/s, MFU 38.1% (megatron), "
        "OFU 42.4%, loss 2.346, 2 alerts (tm summary); run /r/x"
    )
    # no engine numbers at all: the elapsed time tm measured itself, and where the log is not
    assert summary_line({}, None, elapsed_s=2.0) == "trainmeter: 2.0 s; no run log"


def test_time_bar_is_proportional_and_fills_its_width() -> None:
    parts = [
        {"name": "startup", "s": 2.0},
        {"name": "data", "s": None},  # not measured: no cells, never zero-width guesswork
        {"name": "compute", "s": 6.0},
        {"name": "after", "s": 2.0},
    ]
    # 2 + 6 + 2 = 10 s over 10 cells: 2, 6 and 2 cells
    assert time_bar(parts, 10).plain == "▓▓██████░░"
    # 1/3 each over 10 cells: 3.33 each, the largest remainders get the spare cell -> 4, 3, 3
    thirds = [{"name": "startup", "s": 1.0}, {"name": "compute", "s": 1.0}, {"name": "after", "s": 1.0}]
    assert time_bar(thirds, 10).plain == "▓▓▓▓███░░░"


SNAP = {
    "run": {"name": "llm", "exit_status": 0},
    "steps": 10, "tokens_seen": 10_240, "tokens_per_s": 2048.0, "step_time_s": 0.5,
    "tokens_counted": "real (padding excluded)",
    "padding": {"tokens_total": 12_800, "tokens_real": 10_240, "share": 0.2},
    "budget": {"unit": "tokens", "value": 40_960, "source": "declared"}, "progress": 0.25,
    "eta_s": 15.0,
    "plan": {"mfu": {"planned": 0.4, "measured": 0.381, "convention": "megatron"},
             "hours": {"planned": 2.0, "projected": 2.5}},
    "ranks": {"step_time_s": {"0": 0.5, "1": 0.6}, "slowest": "1", "fastest": "0", "spread": 0.2},
    "energy": {"joules": 1500.0, "per_gpu": {"0": 1500.0}, "joules_per_token": 1500.0 / 10_240},
    "time": {"elapsed_s": 10.0, "goodput": 0.8, "parts": [
        {"name": "startup", "label": "Startup and compile", "s": 2.0},
        {"name": "data", "label": "Data wait", "s": None},
        {"name": "compute", "label": "Compute", "s": 8.0, "measured": False}]},
    "series": {"train_loss": {"value": 2.345678, "count": 10, "via": "emit", "step": 10}},
    "alerts": [{"kind": "straggler", "message": "rank 1 is 20% slower than rank 0"}],
    "warnings": ["tokens disagree"],
    "absent": {"mfu": "no dense peak: declare --peak-tflops"},
    "explain": {"tokens_per_s": {
        "value": 2048.0, "unit": "tokens/s", "formula": "tokens / seconds over the window",
        "inputs": [{"name": "tokens", "value": 10240, "unit": "tokens", "source": "agent"},
                   {"name": "seconds", "value": 5.0, "unit": "s", "source": "step records"}]}},
}


def test_summary_text_groups_every_number_with_its_reason() -> None:
    text = summary_text(SNAP, "runs/a")
    lines = [" ".join(line.split()) for line in text.splitlines()]  # columns, not spaces
    assert lines[:2] == ["llm finished 10.0 s", "run runs/a"]
    assert "tokens/s 2.0k counting real (padding excluded)" in lines
    assert "step time 500 ms rank 0" in lines
    assert "padding 20.0% of tokens" in lines  # 1 - 10240 / 12800
    assert "budget 41.0k tokens (declared)" in lines
    assert any(line.endswith("25.0% ETA 15.0 s") for line in lines)
    # plan vs actual: 40% planned, 38.1% measured; 2 h planned, 2.5 h projected
    i = lines.index("plan vs actual")
    assert lines[i + 2].split() == ["MFU", "40.0%", "38.1%", "megatron"]
    assert lines[i + 3].split() == ["hours", "2", "2.5", "projected"]
    # energy: 1500 J over 10240 tokens = 0.146 J/token
    assert "1.5 kJ (GPU 0 1.5 kJ) 146 mJ per token" in lines  # one rule, as everywhere
    # time: 2 s of 10 s startup, 8 s compute (the rest); data wait not measured
    assert "10.0 s elapsed goodput 80.0%" in lines
    assert "▓ Startup and compile 2.0 s 20.0%" in lines
    assert "▒ Data wait: not measured" in lines
    assert "█ Compute 8.0 s 80.0% (the rest)" in lines
    # ranks: the slowest named, and the spread 0.6 / 0.5 - 1 = 20%
    assert lines[lines.index("Ranks (step time)") + 2].split() == ["rank", "1", "600", "ms", "slowest"]
    assert "spread 20.0% (rank 1 is that much slower than rank 0)" in lines
    assert "train_loss 2.346 10 values step 10 emit" in lines
    assert "Alerts (1)" in lines
    assert "! straggler rank 1 is 20% slower than rank 0" in lines
    assert "· tokens disagree" in lines
    i = lines.index("mfu:")  # the absent key, its reason beneath it
    assert lines[i + 1] == "no dense peak: declare --peak-tflops"
    # the explanation: formula, then each input with its value, unit and provenance
    i = lines.index("tokens_per_s = 2048 tokens/s")
    assert lines[i + 1 : i + 4] == [
        "tokens / seconds over the window",
        "tokens = 10240 tokens [agent]",
        "seconds = 5 s [step records]",
    ]
    assert "\x1b" not in text


def test_summary_text_copes_with_an_empty_or_old_snapshot() -> None:
    assert summary_text({}).splitlines()[0] == "run"
    old = {"steps": 3, "mfu": {"range": [0.1, 0.2]}, "time": {"elapsed_s": 1.0}}
    text = summary_text(old)
    assert "MFU 10.0-20.0% by convention" in text and "How each number" not in text


def test_sparkline_resamples_to_its_width_and_scales_to_eight_heights() -> None:
    from trainmeter.views.top import sparkline

    assert sparkline([0, 1, 2, 3, 4, 5, 6, 7], 8) == "▁▂▃▄▅▆▇█"  # (v - 0) / 7 * 8, capped at 7
    # 8 values into 4 cells: the mean of each pair, 0.5 2.5 4.5 6.5 over 0.5..6.5
    assert sparkline([0, 1, 2, 3, 4, 5, 6, 7], 4) == "▁▃▆█"
    assert sparkline([5.0, 5.0 * (1 + 1e-9)], 2) == "▄▄"  # flat, give or take rounding
    assert sparkline([], 10) == ""


def test_summary_text_says_observe_only_up_front_and_never_crops_a_reason() -> None:
    reason = "the command started a Python without the agent: GPU and host numbers only"
    snap = {"facts": {"observe_only": {"value": reason, "source": "detected"},
                      "device": {"value": {"name": "NVIDIA H100", "index": 0}, "source": "detected"}}}
    text = summary_text(snap, "r")
    assert text.splitlines()[1] == f"observe-only: {reason}"
    flat = " ".join(text.split())
    assert "device NVIDIA H100 detected" in flat
    assert f"observe_only (see note) detected {reason}" in flat  # whole, wrapped not cropped


def test_a_facts_reason_is_said_once_and_a_list_in_words() -> None:
    """A reason that is its own note (the agent's counted_unavailable) is printed once, not
    twice; a structured value (the models trained) by its note, not as Python's repr."""
    reason = "no token tensor was seen, so FLOPs per token cannot be formed"
    models = [{"name": "netG_A", "class": "Sequential", "params": 514}]
    words = "2 models trained together: netG_A (Sequential) 514, netD_A (Sequential) 289"
    snap = {"facts": {
        "counted_unavailable": {"value": reason, "source": "measured", "note": reason},
        "models": {"value": models, "source": "detected", "note": words},
        "observe_only": {"value": "not a Python program (sh)", "source": "detected",
                         "note": "pid 7, watched for 3 s"},
    }}
    flat = " ".join(summary_text(snap, "r").split())
    assert flat.count(reason) == 1
    assert f"counted_unavailable (see note) measured {reason}" in flat
    assert f"models (see note) detected {words}" in flat and "'class'" not in flat
    # a reason with a note of its own keeps both
    assert "observe_only (see note) detected not a Python program (sh). pid 7" in flat


def test_units_read_the_same_everywhere() -> None:
    """One decimal below 100 once scaled (energy '1.4 kJ'), memory in GiB/MiB."""
    from trainmeter.views.format import si_unit

    assert si_unit(1403, "J") == "1.4 kJ" and si_unit(14030, "J") == "14.0 kJ"
    assert si_unit(0.146, "J") == "146 mJ" and si_unit(140300, "J") == "140 kJ"
    assert si_unit(80 * 2**30, "B") == "80.0 GiB"  # an '80GB' card, as NVML gives it
    assert si_unit(85.5e9, "B") == "79.6 GiB"  # 85.5e9 / 2**30 = 79.63
    assert si_unit(300 * 2**20, "B") == "300 MiB" and si_unit(512, "B") == "512 B"
