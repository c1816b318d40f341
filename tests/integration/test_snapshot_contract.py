"""docs/snapshot.md is the snapshot's contract: every key a real run produces is in its table,
and every explanation in a real run can be redone from its own inputs.

The example trains under `tm` with the fake GPUs a bug report would attach: two H100 SXM with
GPM (one busy, one idle) and an A100 without GPM.
"""

from __future__ import annotations

import pytest

from ..conftest import EXAMPLES, REPO, latest_summary, run_tm, tm_env, together
from ..engine.snapshot_keys import undocumented
from ..engine.test_explain import redo

pytestmark = pytest.mark.slow

FIXTURES = REPO / "tests" / "fixtures" / "nvml"


FAKES = ["h100_sxm_gpm.json", "a100_no_gpm.json"]


@pytest.fixture(scope="module")
def summaries(tmp_path_factory) -> dict[str, dict]:
    """The example on each fake, the two runs at once (one process each on the box's two
    cores; each tm tries the dashboard's ports from 8765 up, so they never share one)."""

    def run(fake: str) -> dict:
        cwd = tmp_path_factory.mktemp(fake.split(".")[0])
        env = tm_env(TRAINMETER_FAKE_NVML=str(FIXTURES / fake))
        args = ["--budget-steps", "400", "--convention", "megatron", str(EXAMPLES / "tiny_gpt.py")]
        result = run_tm([*args, "--steps", "60"], cwd=cwd, env=env)
        assert result.returncode == 0, result.stderr
        return latest_summary(cwd)

    return dict(zip(FAKES, together(*(lambda fake=fake: run(fake) for fake in FAKES)), strict=True))


@pytest.fixture(params=FAKES)
def summary(request, summaries):
    return request.param, summaries[request.param]


def test_every_key_of_a_real_snapshot_is_in_the_table(summary):
    _, snap = summary
    assert "mfu" in snap and "ladder" in snap and "energy" in snap  # the fake GPUs were read
    assert undocumented(snap) == []


def test_every_explanation_of_a_real_run_is_redone_from_its_inputs(summary):
    fixture, snap = summary
    explain = snap["explain"]
    expected = {"tokens_per_s", "step_time_s", "flops_per_token", "mfu", "progress",
                "energy_per_token", "goodput"}
    if fixture.startswith("h100"):
        expected |= {"ofu", "flops_observed", "arithmetic_intensity"}
    assert expected <= set(explain)
    for name, entry in explain.items():
        assert redo(entry) == pytest.approx(entry["value"], rel=1e-9), name
    assert explain["mfu"]["value"] == snap["mfu"]["value"]
    assert explain["mfu"]["convention"] == "megatron"
    assert explain["mfu"]["peak_source"] == snap["peak"]["source"]
    # 60 steps of 16 x 64 tokens, of the 400-step budget: 61,440 / 409,600 = 0.15
    assert explain["progress"]["value"] == pytest.approx(0.15)
    assert "eta_s" not in snap and snap["absent"]["eta_s"] == "the run has ended"
