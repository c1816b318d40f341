"""Training programs written the ways public training code is written, each run under `tm` and
without it; what `tm` recorded is held against what each program counted about itself.

Every program in `programs/` prints a `TRUTH` line (its own count of optimizer updates, of the
token ids it fed the model in training forwards, and the shape it built) and `LOSS` lines with
exact floats. All the runs are made in one fixture, then each test reads its own: the runs under
`tm` each as a person starts it; beside them the plain runs one after the other, each in a child
forked from one interpreter that imported torch once (plain_batch.py: each program's own
`import torch` was a quarter of its plain run). The runs are queued as the session starts and
made one at a time while the tests before run, two at a time once the fixture waits for them
(background.py). `TM_CORPUS_TABLE=path` also
writes the table of docs/loops.md from the runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ..conftest import run_dirs, tm_env
from . import background

pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # starts two processes per program

PROGRAMS = Path(__file__).resolve().parent / "programs"
WIDTH = 2  # runs at a time once the tests need them: one per core
PLAIN_BATCH = Path(__file__).resolve().parent / "plain_batch.py"

#: program -> how it updates its weights: the step signal `tm` should say it used
CASES = {
    "manual_sgd_lstm": "backward",
    "functional_update": "backward",
    "custom_optimizer_encoder": "backward",
    "gan_two_optimizers": "optimizer",
    "actor_critic": "optimizer",
    "lbfgs_closure": "optimizer",
    "nanogpt_accum": "optimizer",
    "hand_blocks_nograd_eval": "optimizer",
    "ddp_no_sync": "optimizer",
    "seq_first_encoder": "optimizer",
    "nn_transformer_seq2seq": "optimizer",
    "hf_gpt2_loop": "optimizer",
    "hf_bert_padding": "optimizer",
    "accelerate_accum": "optimizer",
    "vit_torchvision_shape": "optimizer",
    "vit_timm_shape": "optimizer",
    "lightning_demo_transformer": "optimizer",
    "timm_task_ema": "optimizer",
    "litgpt_meta_flops": "optimizer",
    "torchtitan_meta_init": "optimizer",
    "nanogpt_zero_amp": "optimizer",
    "hf_trainer_llama": "optimizer",
    "imagenet_resnet_dataparallel": "optimizer",
    "moe_grouped_mm": "optimizer",
    # public scripts nobody here wrote (pytorch/examples, adapted to run tiny and offline)
    "pytorch_examples_dcgan": "optimizer",
    "pytorch_examples_time_sequence": "optimizer",
    "pytorch_examples_actor_critic": "optimizer",
    "pytorch_examples_regression": "backward",
    "pytorch_examples_word_language_model": "backward",
}
NEEDS = {
    "hf_gpt2_loop": "transformers",
    "hf_bert_padding": "transformers",
    "accelerate_accum": "accelerate",
    "lightning_demo_transformer": "lightning",
    "hf_trainer_llama": "transformers",
    "moe_grouped_mm": "transformers",
}
#: truth key -> the fact `tm` records it as
FACTS = {
    "N": "n_params",
    "E": "n_embedding_params",
    "L": "n_layers",
    "d": "d_model",
    "T": "seq_len",
    "samples_per_step": "samples_per_step",
    "counted_flops_per_token": "counted_flops_per_token",
    "counted_flops_per_step": "counted_flops_per_step",
}


def _env(with_tm: bool) -> dict[str, str]:
    env = tm_env(OMP_NUM_THREADS="1", PYTHONHASHSEED="0")
    if not with_tm:
        env["PYTHONPATH"] = ""
    return env


def _run(name: str, root: Path, modes: tuple[str, ...] = ("tm", "plain")) -> dict:
    program = str(PROGRAMS / f"{name}.py")
    out: dict = {"name": name}
    for mode in modes:
        cwd = root / f"{name}-{mode}"
        cwd.mkdir()
        argv = [sys.executable, program]
        if mode == "tm":
            argv = [sys.executable, "-m", "trainmeter", "--no-web", "--quiet", program]
        started = time.monotonic()
        proc = subprocess.run(
            argv, cwd=cwd, env=_env(mode == "tm"), capture_output=True, text=True, timeout=240
        )
        out[mode] = {
            "rc": proc.returncode,
            "stdout": proc.stdout,
            "stderr": proc.stderr,
            "s": time.monotonic() - started,
            "cwd": cwd,
        }
    return out


def _preload(name: str) -> list[str]:
    """The modules a program's plain run imports itself, which plain_batch.py may import once for
    all the programs that do: torch._dynamo for a program stepping an optimizer object (its
    constructor is wrapped in `torch._disable_dynamo`, which imports it: 1.2 s of CPU), and the
    library the program is written for (NEEDS). A program without them (the hand-updated ones)
    never gets them, so nothing tm's agent may import is in its reference run."""
    out = ["torch._dynamo"] if CASES[name] == "optimizer" else []
    return out + ([NEEDS[name]] if name in NEEDS else [])


def _start_plain(names: list[str], root: Path) -> tuple[subprocess.Popen, dict[str, dict]]:
    """The plain runs, one after the other in one process that imported torch once
    (plain_batch.py), started beside the tm runs; `_plain_done` reads them."""
    jobs, runs = [], {}
    for name in names:
        cwd = root / f"{name}-plain"
        cwd.mkdir()
        job = {"program": str(PROGRAMS / f"{name}.py"), "cwd": str(cwd),
               "stdout": str(root / f"{name}.plain.out"), "stderr": str(root / f"{name}.plain.err"),
               "preload": _preload(name)}
        jobs.append(job)
        runs[name] = job
    (root / "plain.json").write_text(json.dumps(jobs))
    with open(root / "plain_batch.log", "wb") as log:  # never into a test's captured output
        batch = subprocess.Popen([sys.executable, str(PLAIN_BATCH), str(root / "plain.json")],
                                 cwd=root, env=_env(False), stdout=log, stderr=log)
    return batch, runs


def _plain_done(batch: subprocess.Popen, runs: dict[str, dict]) -> dict[str, dict]:
    log = Path(batch.args[-1]).parent / "plain_batch.log"  # type: ignore[index]
    assert batch.wait(timeout=600) == 0, f"plain_batch.py failed: {log.read_text()[-3000:]}"
    out = {}
    for name, job in runs.items():
        status = Path(job["stdout"] + ".status")
        rc, seconds = status.read_text().split() if status.exists() else ("-1", "nan")
        out[name] = {"rc": int(rc), "stdout": Path(job["stdout"]).read_text(),
                     "stderr": Path(job["stderr"]).read_text(), "s": float(seconds),
                     "cwd": Path(job["cwd"])}
    return out


@pytest.fixture(scope="module")
def corpus(request: pytest.FixtureRequest) -> dict[str, dict]:
    """Every selected program's runs: under tm two at a time (each as a person starts it),
    beside them the plain runs one after the other (plain_batch.py), all queued as the session
    started (background.py) and most made by now on the core the tests before left idle."""
    runs = background.start(request.session)
    results = {name: runs.queue.result(f"tm:{name}", WIDTH) for name in runs.corpus}
    if runs.corpus:
        for name, run in runs.queue.result("plain", WIDTH).items():
            results[name]["plain"] = run
    table = os.environ.get("TM_CORPUS_TABLE")
    if table:
        Path(table).write_text(_table(results))
    return results


def _available(name: str) -> bool:
    need = NEEDS.get(name)
    if need is None:
        return True
    try:
        __import__(need)
    except Exception:  # noqa: BLE001 - a library not installed: that program is skipped
        return False
    return True


def _truth(stdout: str) -> dict:
    for line in stdout.splitlines():
        if line.startswith("TRUTH "):
            return json.loads(line[6:])
    raise AssertionError(f"no TRUTH line in:\n{stdout}")


def _losses(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("LOSS ")]


def _summary(run: dict) -> dict:
    (run_dir,) = run_dirs(run["tm"]["cwd"])
    return json.loads((run_dir / "summary.json").read_text())


def _seen(summary: dict) -> dict:
    facts = summary.get("facts", {})
    seen = {"steps": summary.get("steps"), "tokens": summary.get("tokens_seen")}
    for key, fact in FACTS.items():
        seen[key] = facts.get(fact, {}).get("value")
    seen["signal"] = facts.get("step_signal", {}).get("value")
    seen["shape_unknown"] = facts.get("shape_unknown", {}).get("value")
    return seen


@pytest.mark.parametrize("name", list(CASES))
def test_tm_sees_what_the_program_counted(corpus: dict[str, dict], name: str) -> None:
    if name not in corpus:
        why = f"{NEEDS[name]} is not installed" if not _available(name) else "not in TM_CORPUS_ONLY"
        pytest.skip(why)
    run = corpus[name]
    for mode in ("tm", "plain"):
        assert run[mode]["rc"] == 0, f"{mode}: {run[mode]['stderr'][-3000:]}"
    truth = _truth(run["tm"]["stdout"])
    assert truth["saved"], "torch.save(model) of the whole module failed under tm"
    # promise 1: the run is the same run, loss for loss, bit for bit
    assert _losses(run["tm"]["stdout"]) == _losses(run["plain"]["stdout"])
    assert _losses(run["tm"]["stdout"])
    seen = _seen(_summary(run))
    assert seen["steps"] == truth["steps"]
    assert seen["signal"] == CASES[name]
    if "tokens" in truth:  # padding excluded where the program could count it
        assert seen["tokens"] == truth.get("real_tokens", truth["tokens"])
    else:
        assert not seen["tokens"]  # no token ids fed: no tokens made up
    for key in FACTS:
        if key in truth:
            assert seen[key] == truth[key], f"{key}: tm {seen[key]}, truth {truth[key]}"
    if truth.get("counted"):  # a step was counted, every matmul-class op with a formula
        facts = _summary(run).get("facts", {})
        assert "counted_flops_per_step" in facts, facts.get("counted_unavailable")
        assert "counted_missing_ops" not in facts, facts["counted_missing_ops"]
    if "models" in truth:  # several models trained together: each by name, its parameters
        models = _summary(run).get("facts", {}).get("models", {}).get("value")
        assert [[m["name"], m["params"]] for m in models or []] == truth["models"]
    absent = truth.get("absent", [])  # what the model has no such number for
    for key in absent:
        assert seen[key] is None, f"{key}: tm made up {seen[key]}"
    if {"L", "d"} & set(absent):
        assert seen["shape_unknown"], "L or d absent with no reason given"


def _table(results: dict[str, dict]) -> str:
    rows = [
        "| program | steps | tokens | samples/step | N | E | L | d | T | signal |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, run in results.items():
        try:
            truth, seen = _truth(run["tm"]["stdout"]), _seen(_summary(run))
        except Exception as exc:  # noqa: BLE001 - the table shows the failure, the test fails
            rows.append(f"| {name} | failed: {exc} |")
            continue
        cells = [name]
        for key in ("steps", "tokens", "samples_per_step", "N", "E", "L", "d", "T"):
            got, want = seen.get(key), truth.get(key)
            if key == "tokens" and "real_tokens" in truth:
                want = truth["real_tokens"]  # tokens_seen excludes padding where it is known
            if isinstance(got, float) and got.is_integer():
                got = int(got)
            mark = "" if want is None or got == want else " ✗"
            shown = "—" if got is None else got
            cells.append(f"{shown} / {'—' if want is None else want}{mark}")
        cells.append(str(seen["signal"]))
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"
