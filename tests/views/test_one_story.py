"""One story on every screen: the waterfall, the passport, `tm runs`, the job summary, the
Prometheus label, provenance words, section titles, the absent list and tiny numbers agree
with the snapshot and with each other."""

from __future__ import annotations

import pytest

from tests.engine.build import (
    H100,
    device,
    end,
    fact,
    gpu,
    gpu_row,
    hello,
    phase,
    run,
    start,
    steps,
)
from tests.engine.test_budget import SHAPE
from trainmeter.views.insight_text import waterfall_lines, waterfall_title

COUNTED = 7.0e9  # FLOPs the operators executed per token (the agent's counted step)


def h100_row():
    return gpu_row(
        0, H100, gpu_util=0.98, sm_active=0.95, tensor_active=0.70, sm_clock_mhz=1755,
        max_sm_clock_mhz=1980, window_s=1.0,
    )


def gpu_run(**declared):
    return run(
        start(0.0, **SHAPE, **declared),
        hello(0.1, probes=("steps", "dataloader")),
        device(0.2),
        fact(0.3, "counted_flops_per_token", COUNTED),
        steps(1.0, 1.0, 3, 10_000),
        phase(3.5, "data", 0.1),
        steps(4.0, 1.0, 3, 10_000),
        gpu(5.0, h100_row()),
        end(8.0),
    )


def test_the_waterfall_ends_at_the_mfu_the_tiles_show():
    snap = gpu_run(convention="hf")
    wf = snap["waterfall"]
    assert wf["ends_at"] == "mfu" and wf["value"] == snap["mfu"]["value"]
    text = waterfall_lines(snap)
    assert text[0].startswith("MFU waterfall (hf)")
    assert text[-2 if "whole_run" in wf else -1].strip().startswith("= MFU")


def test_without_a_convention_the_waterfall_says_it_ends_at_the_counted_utilization():
    snap = gpu_run()
    assert "range" in snap["mfu"] and "value" not in snap["mfu"]
    wf = snap["waterfall"]
    assert wf["ends_at"] == "counted.utilization"
    assert wf["value"] == pytest.approx(snap["counted"]["utilization"])
    assert "--convention" in wf["mfu_absent"]
    lines = waterfall_lines(snap)
    assert not any("MFU waterfall" in x or x.strip().startswith("= MFU") for x in lines)
    assert "ends at the counted utilization" in lines[0]
    assert any(x.strip().startswith("= counted utilization") for x in lines)
    title = waterfall_title(snap)
    assert not title.startswith("MFU") and "counted utilization" in title


def test_with_no_convention_the_passport_carries_the_mfu_range_and_the_counted_utilization():
    from trainmeter.views.passport import build_passport
    from trainmeter.views.passport_md import render_markdown

    snap = gpu_run()
    passport = build_passport(snap)
    numbers = passport["training"]
    assert numbers["mfu_range"]["value"] == snap["mfu"]["range"]
    assert numbers["counted_utilization"]["value"] == snap["counted"]["utilization"]
    assert "--convention" in passport["absent"]["mfu"]
    assert "no dense peak" not in passport["absent"]["mfu"]  # the peak is known
    text = render_markdown(passport)
    lo, hi = snap["mfu"]["range"]
    assert "| MFU range (no convention chosen) |" in text
    assert "| Counted utilization |" in text


def test_tm_runs_shows_the_range_when_no_convention_was_chosen(tmp_path, monkeypatch, capsys):
    import json

    from trainmeter.cli.runs import main as runs_main

    snap = gpu_run()
    root = tmp_path / ".trainmeter" / "runs"
    for name, s in (("20261201-100000-none", snap), ("20261201-110000-hf", gpu_run(convention="hf"))):
        (root / name).mkdir(parents=True)
        (root / name / "summary.json").write_text(json.dumps(s))
        (root / name / "meta.json").write_text(json.dumps({"name": name, "exit_status": 0}))
        (root / name / "events.jsonl").write_text("")
    monkeypatch.chdir(tmp_path)
    assert runs_main([]) == 0
    out = capsys.readouterr().out
    none_line = next(x for x in out.splitlines() if x.startswith("20261201-100000-none"))
    assert none_line.rstrip().endswith("range") and "–" in none_line
    hf_line = next(x for x in out.splitlines() if x.startswith("20261201-110000-hf"))
    assert hf_line.rstrip().endswith("hf")
    assert runs_main(["--json"]) == 0
    doc = {r["dir"]: r for r in json.loads(capsys.readouterr().out)}
    assert doc["20261201-100000-none"]["mfu_range"] == snap["mfu"]["range"]
    assert doc["20261201-100000-none"]["counted_utilization"] == snap["counted"]["utilization"]


def test_the_top_level_keys_in_code_are_the_documented_ones():
    from tests.engine.snapshot_keys import documented
    from trainmeter.engine.keys import TOP_LEVEL_KEYS

    top = {p.split(".")[0].split("[")[0] for p in documented()}
    assert top == set(TOP_LEVEL_KEYS)


def test_the_job_summary_has_every_documented_key_or_says_why_not(tmp_path, capsys):
    import json

    from tests.engine.test_engine import rich_stream
    from trainmeter.cli.main import main as tm
    from trainmeter.engine.keys import TOP_LEVEL_KEYS

    dirs = []
    for node_rank in (0, 1):
        d = tmp_path / f"node{node_rank}"
        d.mkdir()
        recs = rich_stream()
        recs[0] = {**recs[0], "d": {**recs[0]["d"], "job": {"node_rank": node_rank, "nodes": 2}}}
        (d / "events.jsonl").write_text("\n".join(json.dumps(r) for r in recs) + "\n")
        dirs.append(str(d))
    assert tm(["summary", *dirs, "--json"]) == 0
    job = json.loads(capsys.readouterr().out)
    missing = [k for k in sorted(TOP_LEVEL_KEYS) if k not in job and k not in job["absent"]]
    assert missing == []
    for key in ("advice", "explain", "ofu", "waterfall", "ladder"):
        assert key in job["absent"] and "one node's own" in job["absent"][key], key
    # what describes the model is the same on every node: the job clock's node gives it
    assert job["facts"] and job["conventions"] and job["flops_per_token"]
    assert all(job["absent"][k] for k in job["absent"])


def test_the_prometheus_run_label_is_the_run_directory_on_both_endpoints(tmp_path):
    import http.client
    import re

    from trainmeter.exporters.prometheus import MetricsServer
    from trainmeter.views.web.server import serve, stop
    from trainmeter.views.web.state import DashboardState

    snap = gpu_run(convention="hf")
    snap["run"] = {**snap.get("run", {}), "name": "tiny"}  # both runs were given --name tiny
    seen = []
    for stamp in ("20261204-100000-tiny", "20261204-110000-tiny"):
        run_dir = tmp_path / stamp
        run_dir.mkdir()
        state = DashboardState(mode="live", run_dir=str(run_dir))
        state.on_snapshot(snap, now=1.0)
        srv = serve(state, 0)
        try:
            conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
            conn.request("GET", "/metrics")
            dashboard = conn.getresponse().read().decode()
        finally:
            stop(srv)
        metrics = MetricsServer(("127.0.0.1", 0), run_dir)
        try:
            metrics.on_snapshot(snap, 1.0)
            alone = metrics.body()[0].decode()
        finally:
            metrics.close()
        labels = {m for text in (dashboard, alone) for m in re.findall(r'run="([^"]*)"', text)}
        assert labels == {stamp}, labels
        seen.append(stamp)
    assert len(set(seen)) == 2  # two runs of one name: two series


def test_a_flag_is_declared_even_when_the_shape_was_detected():
    from trainmeter.views.terminal_summary import render_plain

    detected = [fact(0.3 + i / 100, k, v, "detected") for i, (k, v) in enumerate(SHAPE.items())]
    snap = run(
        start(0.0, convention="megatron"), hello(0.1), detected, steps(1.0, 1.0, 6, 10_000),
        end(8.0),
    )
    assert snap["facts"]["convention"]["source"] == "declared"
    text = " ".join(render_plain(snap, None, width=200).split())
    assert "megatron" in text and "◀ chosen (convention declared, shape detected)" in text
    assert "chosen (detected)" not in text


def test_the_absent_list_shows_whole_keys_and_reasons_grouped():
    from trainmeter.views.terminal_summary import render_plain

    reason = (
        "no agent has spoken from the training process (--no-agent, tm attach, or a program "
        "that is not Python): steps and tokens are not counted; run the Python training script "
        "under tm to count them"
    )
    keys = ["steps", "tokens_seen", "tokens_per_s", "step_time_s"]
    long_key = "energy.joules_per_token_with_a_deliberately_long_name_for_the_column"
    snap = {"absent": {**dict.fromkeys(keys, reason), long_key: "the tokens seen are not counted"}}
    text = render_plain(snap, None, width=80)
    body = text.split("what would enable each", 1)[1]
    flat = " ".join(body.split())
    assert "…" not in body
    assert flat.count("no agent has spoken") == 1  # one group for the shared reason
    assert ", ".join(sorted(keys)) + ":" in flat
    assert " ".join(reason.split()) in flat
    assert long_key + ":" in flat and "the tokens seen are not counted" in flat
    assert all(len(line) <= 80 for line in body.splitlines())


def test_the_samples_section_says_what_it_is_on_a_model_with_tokens():
    from trainmeter.views.terminal_summary import render_plain

    snap = {"tokens_seen": 1000.0, "tokens_per_s": 100.0, "samples": {"per_step": 8, "per_s": 4.0,
            "source": "detected"}}
    text = render_plain(snap, None)
    assert "a model without tokens" not in text and "Samples (beside the tokens" in text
    only = render_plain({"samples": {"per_step": 8, "per_s": 4.0, "source": "detected"}}, None)
    assert "Samples (a model without tokens)" in only


def test_a_number_too_small_to_print_is_in_scientific_notation_never_zero():
    import re

    from trainmeter.views.format import fixed, ms
    from trainmeter.views.passport_md import render_markdown, waterfall_rows

    # a tiny CPU run: the MFU is 7.8e-6 and the last factor of its waterfall about 1e-5
    wf = {
        "convention": "megatron", "value": 7.8e-6, "ends_at": "mfu",
        "ends_at_label": "MFU (megatron)",
        "factors": [
            {"name": "time_outside_steps", "label": "Data wait", "value": 0.98, "scope": "steps"},
            {"name": "model_vs_executed", "label": "Gap", "value": 1.2e-5, "scope": "steps"},
        ],
    }
    rows = waterfall_rows(wf)
    kept = {label: value for label, value, _ in rows}
    assert kept["Gap"] == "1.20e-05" and kept["Data wait"] == "0.980"
    zeros = re.compile(r"(?<![\d.])0\.000(?!\d)")  # 0.000 alone, not the start of 0.00078
    assert not zeros.search(render_markdown({"training": {}, "waterfall": wf}))
    assert not zeros.search("\n".join(waterfall_lines({"waterfall": wf})))
    assert fixed(0.00001234) == "1.23e-05" and fixed(0.25) == "0.250" and fixed(0.0) == "0.000"
    assert ms(2e-8) == "20.0 ns" and ms(0.01481) == "14.8 ms"  # a smaller prefix, never 0
