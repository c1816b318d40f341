"""The passport from a hand-made snapshot: each derived number against arithmetic done by hand,
the engine's explanations used when present, absent numbers named, nothing private kept."""

from __future__ import annotations

import json

import pytest

from trainmeter.redact import scrub_command
from trainmeter.views.passport import build_passport
from trainmeter.views.passport_md import fmt, render_markdown


def snapshot(**extra) -> dict:
    snap = {
        "steps": 1000,
        "tokens_seen": 4_096_000.0,
        "tokens_per_s": 50_000.0,
        "step_time_s": 0.08192,
        "flops_per_token": {"value": 6.0e9, "convention": "megatron", "formula": "6(N-E) + 6·L·d·T",
                            "source": "detected"},
        "flops_spent": 6.0e9 * 4_096_000,
        "gpu_hours": 8 * 7200.0 / 3600,  # the engine's (engine/cost.py): 8 GPUs x 7200 s / 3600
        "n_gpus": {"value": 8, "source": "detected"},
        "mfu": {"value": 50_000 * 6.0e9 / (8 * 989.5e12), "convention": "megatron", "n_gpus": 8,
                "peak": "NVIDIA H100 SXM5 80GB", "peak_label": "datasheet",
                "peak_source": "datasheet line: 1,979 teraFLOPS with sparsity, halved"},
        "peak": {"name": "NVIDIA H100 SXM5 80GB", "bf16_dense_flops": 989.5e12, "label": "datasheet",
                 "source": "datasheet line"},
        "time": {"elapsed_s": 7200.0, "finished": True, "goodput": 0.9,
                 "parts": [{"name": "startup", "label": "Startup and compile", "s": 720.0,
                            "measured": True},
                           {"name": "compute", "label": "Compute", "s": 6480.0, "measured": False}]},
        "series": {"train_loss": {"value": 2.25, "count": 1000, "step": 1000, "source": "emitted",
                                  "via": "emit"}},
        "run": {"name": "gpt", "argv": ["/home/alice/proj/.venv/bin/python", "/home/alice/proj/train.py",
                                        "--data=/mnt/alice/tokens", "--wandb-api-key", "abc123",
                                        "hf_abcdefghijklmnop"],
                "hostname": "gpu-node-17", "tm_version": "0.1.0", "unix_time": 1_800_000_000.0,
                "exit_status": 0, "signal": None, "python": "3.11.7"},
        "agent": {"python": "3.11.7", "versions": {"torch": "2.13.0"}},
        "facts": {"n_params": {"value": 1e9, "source": "detected",
                               "note": "seen on gpu-node-17 in /home/alice/proj"}},
        "absent": {"eta_s": "no budget", "energy": "no GPU energy counter"},
    }
    snap.update(extra)
    return snap


def test_numbers_by_hand() -> None:
    p = build_passport(snapshot(), ["/home/alice/proj"])
    t = p["training"]
    assert t["gpu_hours"]["value"] == 16.0  # 8 GPUs x 7200 s / 3600
    assert t["training_flops"]["value"] == 2.4576e16  # 6e9 FLOP/token x 4,096,000 tokens
    # 50,000 tokens/s x 6e9 FLOP/token = 3e14 FLOP/s; / (8 x 989.5e12) = 0.037898...
    assert t["mfu"]["value"] == pytest.approx(3e14 / 7.916e15)
    assert t["mfu"]["value"] == pytest.approx(0.0378979282)
    assert t["mfu"]["peak_source"].startswith("datasheet line: 1,979")
    assert t["wall_time_s"]["value"] == 7200.0 and t["goodput"]["value"] == 0.9
    assert p["run"]["start_utc"] == "2027-01-15T08:00:00+00:00"  # unix 1.8e9
    assert p["run"]["end_utc"] == "2027-01-15T10:00:00+00:00"  # + 7200 s
    md = render_markdown(p)
    assert "| GPU-hours | 16 GPU-h |" in md
    assert "| Training FLOPs | 24.6 PFLOP (megatron convention) |" in md
    assert "| Tokens | 4.1M tokens |" in md
    assert "| MFU | 3.8% (megatron convention), peak: NVIDIA H100 SXM5 80GB |" in md
    assert "| Wall time | 2h00m |" in md


def test_absent_is_named_with_its_reason_never_zero() -> None:
    p = build_passport(snapshot())
    assert "energy_j" not in p["training"]
    assert p["absent"]["energy_j"].startswith("no GPU energy counter")
    assert "eta_s" not in p["absent"]  # a finished run's passport does not plan ahead
    cpu = snapshot(n_gpus={"value": 0, "source": "detected"}, mfu={}, peak={})
    del cpu["gpu_hours"]
    cpu["absent"]["mfu"] = "no dense peak"
    cpu["absent"]["gpu_hours"] = "no GPU was seen in this run (a CPU run, or no NVIDIA driver)"
    q = build_passport(cpu)
    assert "gpu_hours" not in q["training"] and "mfu" not in q["training"]
    assert q["absent"]["gpu_hours"].startswith("no GPU was seen")
    assert q["absent"]["mfu"] == "no dense peak"
    md = render_markdown(q)
    assert "| MFU |" not in md  # not a row saying "not computed": listed once, with why
    assert "- **mfu**: no dense peak" in md


def test_engine_explanations_are_used_when_present() -> None:
    explain = {"mfu": {"value": 0.0379, "unit": "", "formula": "achieved FLOP/s / peak FLOP/s",
                       "inputs": [{"name": "peak", "value": 7.916e15, "unit": "FLOP/s",
                                   "source": "datasheet x 8 GPUs"}],
                       "convention": "megatron", "peak_source": "from explain"}}
    p = build_passport(snapshot(explain=explain))
    mfu = p["training"]["mfu"]
    assert mfu["explained_by"] == "engine" and mfu["formula"] == "achieved FLOP/s / peak FLOP/s"
    assert mfu["inputs"][0]["source"] == "datasheet x 8 GPUs" and mfu["peak_source"] == "from explain"
    assert p["training"]["steps"]["explained_by"] == "snapshot"  # no explanation for steps
    assert "achieved FLOP/s / peak FLOP/s" in render_markdown(p)


def test_markdown_has_the_model_cards_sections() -> None:
    """Hardware and software under "Compute Infrastructure", the numbers under "Speeds, Sizes,
    Times": the headings a Hugging Face model card uses, so each part pastes in as it is."""
    md = render_markdown(build_passport(snapshot()))
    infra = md.split("### Compute Infrastructure\n")[1].split("### Speeds, Sizes, Times\n")[0]
    speeds = md.split("### Speeds, Sizes, Times\n")[1].split("\n\n")[0]
    assert "| Hardware |" in infra and "| Software |" in infra and "| MFU |" not in infra
    assert "| MFU |" in speeds and "| Throughput |" in speeds and "| Hardware |" not in speeds


def test_a_peaks_citation_is_printed_once() -> None:
    p = build_passport(snapshot())
    citation = "NVIDIA H100 product page, H100 SXM column: 'BFLOAT16 ... 1,979 teraFLOPS', halved"
    for name in ("mfu", "ofu"):
        p["training"].setdefault(name, {"value": 0.3, "unit": "fraction"})["peak_source"] = citation
    md = render_markdown(p)
    assert md.count(citation) == 1
    assert "peak's source: as for MFU above" in md


def test_no_host_directory_or_secret() -> None:
    p = build_passport(snapshot(), ["/home/alice/proj"])
    text = json.dumps(p) + render_markdown(p)
    for private in ("gpu-node-17", "/home/alice", "/mnt/alice", "abc123", "hf_abcdefghijklmnop"):
        assert private not in text, private
    assert p["run"]["command"] == ["python", "train.py", "--data=tokens", "--wandb-api-key",
                                   "<redacted>", "<redacted>"]
    assert p["facts"]["n_params"]["note"] == "seen on <host> in <dir>"


def test_scrub_command_keeps_counts() -> None:
    assert scrub_command(["torchrun", "--nproc_per_node=8", "train.py", "--max-tokens", "512"]) == [
        "torchrun", "--nproc_per_node=8", "train.py", "--max-tokens", "512"]


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [(0.5, "fraction", "50.0%"), (2.364e-05, "fraction", "0.0024%"), (69402.07, "tokens/s",
     "69.4k tokens/s"), (204800.0, "tokens", "205k tokens"), (1.38097e11, "FLOP", "138 GFLOP"),
     (None, "s", "not known"), (3725.0, "s", "1h02m")],
)
def test_fmt(value, unit, text) -> None:
    assert fmt(value, unit) == text


def test_registered_for_every_run_and_a_failure_only_warns(tmp_path) -> None:
    from trainmeter.supervisor.options import RunOptions
    from trainmeter.views.observers import make_observers
    from trainmeter.views.passport_files import PassportWriter

    warned: list[tuple[str, str]] = []
    observers = make_observers(RunOptions(), tmp_path, lambda k, m: warned.append((k, m)))
    (writer,) = [o for o in observers if isinstance(o, PassportWriter)]
    writer.on_finish(snapshot())
    assert json.loads((tmp_path / "passport.json").read_text())["training"]["steps"]["value"] == 1000
    assert (tmp_path / "passport.md").read_text().startswith("## Compute: training run `gpt`")
    assert not [o for o in make_observers(RunOptions(), None, print) if isinstance(o, PassportWriter)]
    gone = PassportWriter(tmp_path / "missing", lambda k, m: warned.append((k, m)))
    gone.on_finish(snapshot())  # the directory vanished: one warning, no exception
    # the run directory's writes share the store's warning key, so a disk that already cost the
    # run log is not warned about twice (one warning for a full disk)
    assert warned and warned[-1][0] == "store" and "cannot write the passport" in warned[-1][1]
    import io

    from trainmeter.runlog.warn import WarnOnce

    err = io.StringIO()
    once = WarnOnce(err)
    once("store", "cannot write the run log (disk full); the run goes on without it")
    PassportWriter(tmp_path / "missing", once).on_finish(snapshot())
    assert err.getvalue().count("trainmeter:") == 1 and "passport" not in err.getvalue()


def test_plan_beside_the_run() -> None:
    plan = {"mfu": {"planned": 0.4, "measured": 0.0378979282, "convention": "megatron"},
            "hours": {"planned": 1.5, "projected": 2.0}}
    p = build_passport(snapshot(plan=plan))
    assert p["plan"] == {"mfu": {"planned": 0.4, "actual": 0.0378979282, "convention": "megatron"},
                         "hours": {"planned": 1.5, "actual": 2.0}}
    md = render_markdown(p)
    assert "| MFU | 40.0% | 3.8% |" in md and "| Hours | 1.5 h | 2 h |" in md
    assert build_passport(snapshot())["plan"] is None


def test_the_waterfall_is_one_small_table() -> None:
    # The engine's waterfall of tests/engine/test_waterfall.py (one H100, GPM): window 5 s of
    # 8 s elapsed (0.625); in steps: compute / window 4.9 / 5 = 0.98, SM active over it
    # 0.95 / 0.98 = 0.969388, tensor / SM 0.70 / 0.95 = 0.736842, clocks 1755 / 1830 = 0.959016,
    # MFU / OFU = 0.058932 / 0.671311 = 0.087787. Shares after each: 98.0%, 95.0% (0.98 x
    # 0.969388), 70.0%, 67.1% (0.70 x 0.959016), 5.9% (the MFU); whole run 0.625 x 5.89% = 3.7%
    # (percentages read with one decimal, as in every view: views/format.py).
    from tests.engine.test_waterfall import a_run, gpu, h100_fixture_row

    snap = a_run(gpu(5.0, h100_fixture_row()))
    p = build_passport(snap)
    wf = p["waterfall"]
    assert [f["name"] for f in wf["factors"]][0] == "time_outside_window"
    assert wf["value"] == snap["mfu"]["value"]
    md = render_markdown(p)
    table = md.split("### Where the peak went (MFU waterfall, hf convention)")[1].split("\n\n")[1]
    rows = [[c.strip() for c in r.strip("|").split("|")] for r in table.splitlines()[2:]]
    assert [r[1:] for r in rows] == [
        ["0.625", ""],
        ["0.980", "98.0%"],
        ["0.969", "95.0%"],
        ["0.737", "70.0%"],
        ["0.959", "67.1%"],
        ["0.088", "5.9%"],
        ["", "5.9%"],
        ["", "3.7%"],
    ]
    assert rows[0][0].endswith("(whole run)") and rows[-2][0] == "**MFU** (in steps)"
    # the HTML report shows the same table
    from trainmeter.views.report import _waterfall_html

    html = _waterfall_html(p)
    assert "<td>MFU (in steps)</td><td class=n></td><td class=n>5.9%</td>" in html
    assert "<td class=n>0.969</td><td class=n>95.0%</td>" in html
    # no waterfall (no MFU): no table, and the passport says so nowhere as a zero
    bare = build_passport(snapshot())
    assert bare["waterfall"] is None and "Where the peak went" not in render_markdown(bare)


def test_a_model_without_tokens_shows_samples_and_its_counted_mfu() -> None:
    # tests/engine/test_samples.py's CNN: 32 samples a step (16 x 2 ranks) every 0.5 s = 64/s;
    # MFU (counted) = 283,176,960 FLOP x 2 steps/s / (2 x 989.5e12) = 2.861819e-7
    from tests.engine.test_samples import cnn_run

    p = build_passport(cnn_run())
    t = p["training"]
    assert t["samples_per_s"]["value"] == pytest.approx(64.0)
    assert t["samples_per_s"]["explained_by"] == "engine"
    assert t["samples_mfu"]["value"] == pytest.approx(2.861819e-7, rel=1e-6)
    md = render_markdown(p)
    assert "| Throughput in samples | 64 samples/s |" in md
    assert "| MFU from samples | 2.9e-5% (counted convention) |" in md
    # a model with tokens gets no samples rows and no 'not computed' noise about them
    plain = render_markdown(build_passport(snapshot()))
    assert "samples" not in plain
