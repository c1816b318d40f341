"""The agent's start-up in real processes: hello without torch, off switches, chaining, and a
probe that breaks without breaking the run."""

from __future__ import annotations

import sys
import textwrap

from tests.conftest import together

from conftest import run_agent, run_tiny_lm_pair


def test_python_c_without_torch_says_hello_and_exits_normally(workdir):
    run = run_agent(["python", "-c", "import sys; print('ok'); sys.exit(3)"], workdir)
    assert run.rc == 3 and run.stdout.strip() == "ok"
    assert run.stderr == ""
    hellos = run.kind("hello")
    assert len(hellos) == 1  # torch was never imported: no second hello
    d = hellos[0]["d"]
    assert d["world_size"] == 1 and d["local_rank"] is None
    assert d["python"] == sys.version.split()[0]
    assert d["argv0"] == "-c" and d["pid"] == hellos[0]["pid"]
    assert "torch" not in d["versions"] and "steps" not in d["probes"]
    assert "torch" not in run.stdout


def test_torch_attach_sends_a_second_hello_with_probes_and_version(workdir):
    run = run_agent(
        ["python", "-c", "import torch"], workdir, WORLD_SIZE="4", LOCAL_RANK="1", RANK="3"
    )
    assert run.rc == 0, run.stderr
    last = run.kind("hello")[-1]
    assert last["rank"] == 3
    assert (last["d"]["world_size"], last["d"]["local_rank"], last["d"]["rank"]) == (4, 1, 3)
    assert last["d"]["versions"]["torch"].startswith("2.")
    expected = {"steps", "tokens", "model", "dataloader", "checkpoint", "eval", "flops", "device"}
    expected |= {"architecture", "precision"}
    assert expected <= set(last["d"]["probes"])


def test_no_tap_installs_no_tap(workdir):
    run = run_agent(["python", "-c", "pass"], workdir, TRAINMETER_NO_TAP="1")
    assert run.rc == 0
    assert [r["d"]["probes"] for r in run.kind("hello")] == [[]]
    assert [r["d"]["taps_armed"] for r in run.kind("hello")] == [[]]


TAPS = ["wandb", "tensorboard", "mlflow", "transformers", "lightning"]


def test_armed_taps_are_not_probes_until_their_tracker_is_imported(workdir):
    # a loop that uses no tracker lists none in `probes`; the armed ones are `taps_armed`
    run = run_agent(["python", "-c", "pass"], workdir)
    assert run.rc == 0, run.stderr
    hellos = [r["d"] for r in run.kind("hello")]
    assert [h["probes"] for h in hellos] == [[]]
    assert hellos[0]["taps_armed"] == TAPS
    # importing a tracker (a stand-in tensorboardX here) attaches its tap: another hello
    package = workdir / "tensorboardX"
    package.mkdir()
    (package / "__init__.py").write_text("from .writer import SummaryWriter\n")
    (package / "writer.py").write_text(
        "class SummaryWriter:\n"
        "    def add_scalar(self, tag, scalar_value, global_step=None):\n"
        "        return None\n"
        "    def add_scalars(self, main_tag, tag_scalar_dict, global_step=None):\n"
        "        return None\n"
    )
    run = run_agent(["python", "-c", "import tensorboardX"], workdir)
    assert run.rc == 0, run.stderr
    hellos = [r["d"] for r in run.kind("hello")]
    assert len(hellos) == 2
    assert hellos[0]["probes"] == [] and hellos[-1]["probes"] == ["tensorboard"]
    assert hellos[-1]["taps_armed"] == [t for t in TAPS if t != "tensorboard"]


def test_disable_and_no_socket_send_nothing(workdir):
    check = "import sys; print('trainmeter.agent.probes.steps' in sys.modules)"
    run, outside = together(
        lambda: run_agent(["python", "-c", "import torch; print('ok')"], workdir,
                          TRAINMETER_DISABLE="1"),
        lambda: run_agent(["python", "-c", "import torch; " + check], workdir, agent=False),
    )
    assert run.rc == 0 and run.stdout.strip() == "ok" and run.records == []
    assert outside.rc == 0 and outside.stdout.strip() == "False"


def test_a_users_own_sitecustomize_still_runs(workdir):
    own = workdir / "own"
    own.mkdir()
    (own / "sitecustomize.py").write_text("import os\nos.environ['USER_SITE_RAN'] = 'yes'\n")
    code = "import os; print(os.environ.get('USER_SITE_RAN'))"
    run = run_agent(["python", "-c", code], workdir, extra_pythonpath=str(own))
    assert run.rc == 0, run.stderr
    assert run.stdout.strip() == "yes"
    assert run.kind("hello")


def _breaking_site(workdir, target: str, attribute: str) -> str:
    """A user sitecustomize (chained after ours) that makes one agent function raise."""
    site = workdir / "breaker"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        textwrap.dedent(
            f"""
            import importlib

            def _boom(*args, **kwargs):
                raise RuntimeError("injected failure")

            importlib.import_module("{target}").{attribute} = _boom
            """
        )
    )
    return str(site)


def test_a_probe_that_raises_warns_once_and_the_run_goes_on(workdir):
    site = _breaking_site(workdir, "trainmeter.agent.probes.model", "count_params")
    run, plain = run_tiny_lm_pair(workdir, "--steps", "4", agent_pythonpath=site)
    assert run.rc == 0, run.stderr
    warnings = [line for line in run.stderr.splitlines() if line.startswith("trainmeter:")]
    assert warnings == ["trainmeter: model off: RuntimeError('injected failure'); the run goes on"]
    assert run.losses() == plain.losses()
    assert "n_params" not in run.facts()
    assert run.steps_total("k") == 4  # the other probes went on
    assert run.steps_total("tokens") == 4 * 32


def test_the_hot_path_probe_failing_turns_itself_off(workdir):
    site = _breaking_site(workdir, "trainmeter.agent.probes.tokens", "find")
    run, plain = run_tiny_lm_pair(workdir, "--steps", "4", "--accum", "2", agent_pythonpath=site)
    assert run.rc == 0, run.stderr
    warnings = [line for line in run.stderr.splitlines() if line.startswith("trainmeter:")]
    assert len(warnings) == 2 and warnings[0].startswith("trainmeter: steps off: RuntimeError")
    assert warnings[1].startswith("trainmeter: tokens off:")
    assert run.losses() == plain.losses()
    assert run.truth()["steps"] == 4
