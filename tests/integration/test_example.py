"""The README's first command, checked: the example trains under `tm` and what trainmeter
records matches what the script itself counted."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from ..conftest import EXAMPLES, latest_summary, run_dirs, run_tm, together

pytestmark = pytest.mark.slow

STEPS = 40


@pytest.fixture(scope="module")
def both_runs(tmp_path_factory):
    """The example under `tm` and, at once, the same example without it (one process each on
    the box's two cores), in directories of their own; the plain run's result and report path."""
    cwd = tmp_path_factory.mktemp("example")
    plain_cwd = tmp_path_factory.mktemp("plain")
    report = cwd / "report.json"
    plain_report = plain_cwd / "plain.json"
    result, plain = together(
        lambda: run_tm(
            [str(EXAMPLES / "tiny_gpt.py"), "--steps", str(STEPS), "--report", str(report)],
            cwd=cwd,
        ),
        lambda: subprocess.run(
            [sys.executable, str(EXAMPLES / "tiny_gpt.py"), "--steps", str(STEPS), "--report",
             str(plain_report), "--quiet"],
            cwd=plain_cwd, capture_output=True, text=True, timeout=300,
        ),
    )
    assert result.returncode == 0, result.stderr
    return (cwd, json.loads(report.read_text()), latest_summary(cwd), result), (plain, plain_report)


@pytest.fixture(scope="module")
def example_run(both_runs):
    return both_runs[0]


def _fact(summary: dict, key: str):
    entry = summary["facts"][key]
    return entry["value"], entry["source"]


def test_counts_match_the_script(example_run) -> None:
    _, truth, summary, _ = example_run
    assert summary["steps"] == truth["steps"] == STEPS
    assert summary["tokens_seen"] == truth["tokens"] == STEPS * 16 * 64
    assert summary["tokens_per_s"] > 0
    assert _fact(summary, "n_params") == (truth["n_params"], "detected")
    assert _fact(summary, "n_embedding_params") == (truth["n_embedding_params"], "detected")
    assert _fact(summary, "seq_len") == (truth["seq_len"], "detected")
    assert _fact(summary, "n_layers")[0] == truth["config"]["n_layer"]
    assert _fact(summary, "d_model")[0] == truth["config"]["n_embd"]


def test_flops_range_over_conventions_is_the_hand_formula(example_run) -> None:
    _, truth, summary, _ = example_run
    n, e = truth["n_params"], truth["n_embedding_params"]
    layers, d, t = 2, 64, 64
    # N = 108288, E = 4096 (the position table; the token table is tied to the head).
    # hf drops every nn.Embedding as HF does: E_hf = 4096 + 4096 = 8192 -> 6 x 100,096 = 600576
    # megatron leaves out the 1-D weights (V): a block's LayerNorms 2 x 128, attention biases
    # 192 + 64, MLP biases 256 + 64 = 832; two = 1664, + ln_f 128 = 1792
    #   6 x (108288 - 4096 - 1792) + 6·L·d·T = 614400 + 49152 = 663552
    # all_params 6N + 12·L·d·T = 649728 + 98304
    assert (n, e) == (108288, 4096)
    e_hf, v = 8192, 1792
    expected = {
        "hf": 6 * (n - e_hf),
        "megatron": 6 * (n - e - v) + 6 * layers * d * t,
        "titan": 6 * (n - e) + 12 * layers * d * t,
        "all_params": 6 * n + 12 * layers * d * t,
    }
    assert expected == {"hf": 600576, "megatron": 663552, "titan": 723456, "all_params": 748032}
    fpt = summary["flops_per_token"]
    assert fpt["convention"] == "not chosen"
    assert fpt.get("value") is None
    assert tuple(fpt["range"]) == (600576, 748032)
    assert {k: pytest.approx(v) for k, v in summary["conventions"].items()} == expected


def test_emitted_loss_series_is_the_scripts(example_run) -> None:
    _, truth, summary, _ = example_run
    series = summary["series"]["train_loss"]
    assert series["source"] == "emitted"
    assert series["via"] == "emit"
    assert series["count"] == STEPS
    assert series["value"] == float.fromhex(truth["losses"][-1])


def test_summary_line_and_run_directory(example_run) -> None:
    cwd, _, summary, result = example_run
    (run,) = run_dirs(cwd)
    assert {"events.jsonl", "meta.json", "summary.json"} <= {p.name for p in run.iterdir()}
    assert f"{STEPS} steps" in result.stderr
    assert "tok/s" in result.stderr
    assert "mfu" in summary["absent"]  # a CPU has no dense peak: absent, with the reason
    assert summary["absent"]["mfu"]


def test_replay_gives_the_same_snapshot(example_run) -> None:
    cwd, _, summary, _ = example_run
    result = run_tm(["summary", "--json"], cwd=cwd)
    assert result.returncode == 0, result.stderr
    replayed = json.loads(result.stdout)
    assert replayed == summary


def test_losses_are_bit_identical_with_and_without_tm(example_run, both_runs) -> None:
    _, truth, _, _ = example_run
    plain, report = both_runs[1]  # run beside the example's run under tm
    assert plain.returncode == 0, plain.stderr
    assert json.loads(report.read_text())["losses"] == truth["losses"]
    assert not math.isnan(truth["final_loss"])
