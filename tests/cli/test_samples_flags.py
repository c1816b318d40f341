"""--samples-per-step and --flops-per-sample: declared facts for models without tokens."""

from __future__ import annotations

import pytest

from trainmeter.cli.args import UsageError, parse_run_args


def test_samples_flags_become_declared_facts():
    opts = parse_run_args(["--samples-per-step", "256", "--flops-per-sample", "4.1G", "t.py"])
    assert opts.declared["samples_per_step"] == 256
    assert opts.declared["flops_per_sample"] == 4.1e9


@pytest.mark.parametrize("argv", [["--samples-per-step", "2.5"], ["--flops-per-sample", "0"]])
def test_bad_values_are_usage_errors(argv):
    with pytest.raises(UsageError):
        parse_run_args([*argv, "t.py"])
