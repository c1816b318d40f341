"""The passport of a real example run, field by field against the run's own snapshot, and the
proof that it names no host, no directory and no secret from the command line."""

from __future__ import annotations

import json
import re
import socket

import pytest

from .conftest import API_KEY, HF_TOKEN, STEPS, ExampleRun, tm_cli

pytestmark = pytest.mark.slow


def _passport(run: ExampleRun) -> dict:
    return json.loads((run.run_dir / "passport.json").read_text())


def test_written_at_the_end_of_the_run(example_run: ExampleRun) -> None:
    names = {p.name for p in example_run.run_dir.iterdir()}
    assert {"passport.md", "passport.json"} <= names
    md = (example_run.run_dir / "passport.md").read_text()
    assert md.startswith("## Compute: training run `passported`")
    assert "<details>" in md and "</details>" in md


def test_training_numbers_are_the_snapshots(example_run: ExampleRun) -> None:
    snap, p = example_run.summary, _passport(example_run)
    t = p["training"]
    assert t["steps"]["value"] == snap["steps"] == STEPS == example_run.truth["steps"]
    assert t["tokens"]["value"] == snap["tokens_seen"] == STEPS * 16 * 64  # batch 16, seq 64
    assert t["tokens_per_s"]["value"] == snap["tokens_per_s"]
    assert t["step_time_s"]["value"] == snap["step_time_s"]
    # megatron: 6 x (108288 - 4096 - 1792 one-dimensional weights) + 6 x 2 x 64 x 64 = 663552
    assert t["flops_per_token"]["value"] == snap["flops_per_token"]["value"] == 663552
    assert t["flops_per_token"]["convention"] == "megatron"
    # 663552 FLOP/token x 20480 tokens = 13,589,544,960 FLOP
    assert t["training_flops"]["value"] == snap["flops_spent"] == 663552 * 20480 == 13_589_544_960
    assert t["mfu"]["value"] == snap["mfu"]["value"]
    assert t["mfu"]["convention"] == snap["mfu"]["convention"] == "megatron"
    assert t["mfu"]["peak_source"] == snap["mfu"]["peak_source"]
    assert "1,979 teraFLOPS" in t["mfu"]["peak_source"]  # the datasheet line, quoted
    # MFU by hand: tokens/s x FLOPs/token / (GPUs x 989.5e12)
    n_gpus = snap["n_gpus"]["value"]
    by_hand = snap["tokens_per_s"] * 663552 / (n_gpus * 989.5e12)
    assert t["mfu"]["value"] == pytest.approx(by_hand, rel=1e-9)
    wall = snap["time"]["elapsed_s"]
    assert t["wall_time_s"]["value"] == wall
    assert t["gpu_hours"]["value"] == pytest.approx(n_gpus * wall / 3600)
    assert t["goodput"]["value"] == snap["time"]["goodput"]
    assert t["energy_j"]["value"] == snap["energy"]["joules"]
    assert t["energy_per_token_j"]["value"] == snap["energy"]["joules_per_token"]
    assert t["ofu"]["value"] == snap["ofu"]["value"]
    assert t["progress"]["value"] == snap["progress"] == 0.5  # 20 of a 40-step budget
    for name, entry in t.items():
        assert entry["inputs"] is not None and entry.get("formula"), name


def test_hardware_software_and_series(example_run: ExampleRun) -> None:
    snap, p = example_run.summary, _passport(example_run)
    assert p["hardware"]["gpus"] == snap["n_gpus"]["value"] == 2
    assert p["hardware"]["peak"]["name"] == snap["peak"]["name"]
    assert p["hardware"]["peak"]["bf16_dense_flops_per_gpu"] == 989.5e12
    assert p["software"]["torch"] == snap["agent"]["versions"]["torch"]
    assert p["software"]["trainmeter"] == snap["run"]["tm_version"]
    assert p["software"]["nvidia_driver"] == snap["gpu_versions"]["driver"]
    loss = p["series"]["train_loss"]
    assert loss["final"] == snap["series"]["train_loss"]["value"]
    assert loss["final"] == float.fromhex(example_run.truth["losses"][-1])
    assert loss["count"] == STEPS
    assert p["run"]["status"] == "ok" and p["run"]["name"] == "passported"
    parts = {x["name"]: x["s"] for x in p["time_split"]}
    assert parts == {x["name"]: x["s"] for x in snap["time"]["parts"]}


def test_absent_numbers_are_named_never_zero(example_run: ExampleRun) -> None:
    snap, p = example_run.summary, _passport(example_run)
    for name, reason in snap.get("absent", {}).items():
        if name in ("eta_s", "plan"):
            continue  # a finished run's passport does not plan ahead
        assert p["absent"][name] == reason
        assert name not in p["training"]


def test_names_no_host_directory_or_secret(example_run: ExampleRun) -> None:
    host = socket.gethostname()
    for name in ("passport.md", "passport.json"):
        text = (example_run.run_dir / name).read_text()
        for secret in (HF_TOKEN, API_KEY, "TopSecret", "AnotherSecret"):
            assert secret not in text, (name, secret)
        assert str(example_run.cwd) not in text and str(example_run.run_dir) not in text
        assert "/tmp" not in text and "/home" not in text and "/work" not in text
        assert not re.search(rf"(?<![\w.-]){re.escape(host)}(?![\w-])", text), (name, host)
        assert "hostname" not in text and "environ" not in text and "price" not in text
    command = _passport(example_run)["run"]["command"]
    assert command[1:3] == ["with_secret.py", "--hf-token"]
    assert command[3] == "<redacted>" and "--api-key=<redacted>" in command


def test_tm_passport_rebuilds_the_same_record_from_the_log(example_run: ExampleRun) -> None:
    written = _passport(example_run)
    result = tm_cli(["passport", "--json", "--no-write"], cwd=example_run.cwd)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == written  # a replay gives the live run's numbers
    md = tm_cli(["passport", example_run.run_dir.name[:12]], cwd=example_run.cwd)
    assert md.returncode == 0 and md.stdout == (example_run.run_dir / "passport.md").read_text()
