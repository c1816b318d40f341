"""Parsing `tm`'s command line: SI numbers, fractions, where options stop, clear errors."""

from __future__ import annotations

import sys

import pytest

from trainmeter.cli.args import (
    UsageError,
    parse_count,
    parse_fraction,
    parse_run_args,
    parse_si,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("20B", 20_000_000_000),
        ("20b", 20_000_000_000),
        ("1.5e9", 1_500_000_000),
        ("300M", 300_000_000),
        ("2k", 2_000),
        ("2K", 2_000),
        ("2.3k", 2_300),  # Decimal: 2.3 * 1000 is 2300 exactly, not 2299.9999999999995
        ("7G", 7_000_000_000),
        ("1.5T", 1_500_000_000_000),
        ("4096", 4_096),
        (" 12 ", 12),
    ],
)
def test_si_suffixes_scale_by_powers_of_a_thousand(text: str, expected: int) -> None:
    assert parse_count("--budget-tokens", text) == expected


@pytest.mark.parametrize("text", ["12X", "", "abc", "1.2.3", "--5", "5MB", "nan", "inf", "1e"])
def test_a_non_number_is_one_clear_line(text: str) -> None:
    with pytest.raises(UsageError) as err:
        parse_si("--budget-tokens", text)
    assert str(err.value) == f"--budget-tokens: {text!r} is not a number (use 20B, 1.5e9, 300M)"


def test_counts_must_be_whole_and_positive() -> None:
    with pytest.raises(UsageError, match="not a whole number"):
        parse_count("--layers", "2.5")
    with pytest.raises(UsageError, match="above 0"):
        parse_count("--layers", "0")
    assert parse_count("--embedding-params", "0", allow_zero=True) == 0
    assert parse_count("--params", "1.04B") == 1_040_000_000


@pytest.mark.parametrize(("text", "expected"), [("0.4", 0.4), ("40%", 0.4), ("100%", 1.0)])
def test_plan_mfu_accepts_a_fraction_or_a_percent(text: str, expected: float) -> None:
    assert parse_fraction("--plan-mfu", text) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("text", ["40", "0", "-0.1", "150%", "forty", "%"])
def test_plan_mfu_out_of_range_is_refused(text: str) -> None:
    with pytest.raises(UsageError, match="--plan-mfu"):
        parse_fraction("--plan-mfu", text)


def test_declared_facts_map_to_the_architecture_keys() -> None:
    opts = parse_run_args(
        [
            "--budget-tokens=20B",
            "--budget-steps", "10k",
            "--budget-flops", "1e21",
            "--tokens-per-step", "512k",
            "--flops-per-token", "6.06G",
            "--convention", "megatron",
            "--params", "1.04B",
            "--embedding-params", "67.1M",
            "--layers", "18",
            "--d-model", "2048",
            "--seq-len", "1024",
            "--dp", "8",
            "--plan-mfu", "40%",
            "--plan-hours", "12",
            "--peak-tflops", "989.5",
            "--peak-source", "H100 whitepaper table 3",
            "train.py",
        ],
        python="py",
    )
    d = opts.declared
    assert d["budget_tokens"] == 20_000_000_000
    assert d["budget_steps"] == 10_000
    assert d["budget_flops"] == 1e21
    assert d["tokens_per_step"] == 512_000
    assert d["flops_per_token"] == 6.06e9
    assert d["convention"] == "megatron"
    assert d["n_params"] == 1_040_000_000
    assert d["n_embedding_params"] == 67_100_000
    assert (d["n_layers"], d["d_model"], d["seq_len"], d["dp"]) == (18, 2048, 1024, 8)
    assert d["plan_mfu"] == pytest.approx(0.4)
    assert d["plan_hours"] == 12.0
    # 989.5 TFLOP/s = 989.5e12 FLOP/s per GPU
    assert d["peak_flops"] == pytest.approx(9.895e14)
    assert opts.notes == {"peak_flops": "H100 whitepaper table 3"}
    assert opts.command == ["py", "train.py"]


def test_everything_after_the_script_belongs_to_the_script() -> None:
    opts = parse_run_args(["-q", "train.py", "--lr", "3", "--name", "x", "-q", "--"], python="py")
    assert opts.command == ["py", "train.py", "--lr", "3", "--name", "x", "-q", "--"]
    assert opts.quiet is True
    assert opts.name is None
    assert opts.script == "train.py"
    assert opts.default_name == "train"


def test_double_dash_runs_any_command_and_names_the_run_after_its_script() -> None:
    opts = parse_run_args(["--no-web", "--", "torchrun", "--nproc_per_node=2", "src/pre.py"])
    assert opts.command == ["torchrun", "--nproc_per_node=2", "src/pre.py"]
    assert opts.web is False and opts.script is None
    assert opts.default_name == "pre"
    assert parse_run_args(["--", "./run.sh", "a"]).default_name == "run.sh"
    assert parse_run_args(["--name", "my run", "--", "x"]).default_name == "my run"


def test_dash_m_runs_a_module_with_this_python() -> None:
    opts = parse_run_args(["-m", "pkg.train", "--lr", "1"])
    assert opts.command == [sys.executable, "-m", "pkg.train", "--lr", "1"]
    assert opts.default_name == "train"


def test_switches() -> None:
    opts = parse_run_args(["--no-agent", "--no-tap", "--gpus", "0,1", "--port", "8080", "t.py"])
    assert (opts.agent, opts.tap, opts.gpus, opts.port) == (False, False, "0,1", 8080)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--budget-tokens", "12X", "t.py"], "'12X' is not a number"),
        (["--bogus", "t.py"], "unknown option '--bogus'"),
        (["--convention", "chinchilla", "t.py"], "not one of titan, megatron, hf, all_params"),
        (["--peak-tflops", "989", "t.py"], "go together"),
        (["--peak-source", "a datasheet", "t.py"], "go together"),
        (["--port", "70000", "t.py"], "not a port number"),
        (["--port", "-1", "t.py"], "not a port number"),
        (["--port", "\u00b2", "t.py"], "not a port number"),  # isdigit() says yes; int() raised
        (["--metrics-addr", ":\u00b2", "t.py"], "is not HOST:PORT"),
        (["--metrics-addr", ":0", "t.py"], "is not HOST:PORT"),
        (["--budget-tokens"], "needs a value"),
        (["--"], "nothing to run"),
        (["-q"], "nothing to run"),
        (["--gpus", "0;rm", "t.py"], "not a list of GPU"),
    ],
)
def test_bad_command_lines_are_refused(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_run_args(argv)


def test_help_and_version_stop_parsing() -> None:
    assert parse_run_args(["--help", "--bogus"]).show == "help"
    assert parse_run_args(["--version"]).show == "version"


def test_help_names_exactly_the_commands_that_exist_and_the_web_flags() -> None:
    import re

    from trainmeter.cli.args import usage
    from trainmeter.cli.main import COMMANDS

    USAGE = usage()
    named: set[str] = set()
    for line in USAGE.splitlines():
        match = re.match(r"\s*(?:usage:)?\s*tm ([a-z][a-z |]*?)(?: [A-Z\[]|\s{2,}|$)", line)
        if match:
            named.update(w for w in match.group(1).split(" | ") if w.strip())
    assert named == set(COMMANDS)
    web = next(line for line in USAGE.splitlines() if "--no-web" in line)
    assert "--no-web" in web and "reserved" not in web


@pytest.mark.parametrize(
    "argv",
    [
        ["--budget-tokens", "1e999999999", "t.py"],
        ["--budget-flops", "1e400", "t.py"],
        ["--peak-tflops", "1e400", "--peak-source", "x", "t.py"],
        ["--params", "1e400", "t.py"],
        ["--plan-hours", "1e-400", "t.py"],
        ["--plan-mfu", "1e-400", "t.py"],
        ["--flops-per-token", "1e999", "t.py"],
        ["--layers", "1e300", "t.py"],
    ],
)
def test_declared_numbers_out_of_range_are_refused(argv: list[str]) -> None:
    with pytest.raises(UsageError, match="out of range|must be between 0 and 1"):
        parse_run_args(argv)


def test_declared_numbers_at_their_limits_are_finite() -> None:
    import math

    opts = parse_run_args(["--budget-flops", "1e32", "--plan-hours", "1e-6", "--params", "1e16", "t.py"])
    assert all(math.isfinite(v) and v > 0 for v in opts.declared.values())


def test_a_program_as_first_word_is_the_command_as_after_double_dash(tmp_path) -> None:
    import os

    opts = parse_run_args(["--budget-steps", "5", "python3", "train.py", "--lr", "3"])
    assert opts.command == ["python3", "train.py", "--lr", "3"] and opts.script is None
    assert opts.default_name == "train"
    exe = tmp_path / "venv" / "bin" / "python"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    assert parse_run_args([str(exe), "t.py"]).command == [str(exe), "t.py"]
    assert parse_run_args(["sh", "-c", "x"]).command == ["sh", "-c", "x"]
    plain = tmp_path / "train"  # a Python file without .py, not executable: a script, as before
    plain.write_text("print(1)\n")
    assert parse_run_args([str(plain)], python="py").command == ["py", str(plain)]
    assert parse_run_args(["missing.py"], python="py").command == ["py", "missing.py"]
    assert os.access(exe, os.X_OK)


def test_a_word_that_names_nothing_is_refused() -> None:
    with pytest.raises(UsageError, match="nosuchthing-xyz: not a tm command, a Python script or a program"):
        parse_run_args(["nosuchthing-xyz", "a"])


def test_mixture_of_experts_flags_declare_experts_top_k_and_routed_weights() -> None:
    opts = parse_run_args(
        ["--experts", "64", "--top-k", "8", "--routed-params", "6.4B", "train.py"], python="py"
    )
    assert opts.declared["moe_experts"] == 64
    assert opts.declared["moe_top_k"] == 8
    assert opts.declared["moe_routed_params"] == 6_400_000_000
    with pytest.raises(UsageError, match="--top-k"):
        parse_run_args(["--top-k", "0", "train.py"], python="py")
