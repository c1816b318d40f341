"""Records sent to the run's socket are bounded by what can be true (issue 29, item 7).

Before, a process of the run could write anything to the socket and be believed: 50 `step`
records of k = 999,999 in a one-second run gave 50 M steps and 50 T tokens, a checkpoint phase
of 10^9 s took the whole time split, a `declared` peak of 10^-20 FLOP/s gave an MFU of 10^76 %,
and a `sample.gpu` saying `src: tm` put an H100 on a CPU box. Now what a rank did is bounded by
the time since `run.start` (`plausible.Ledger`), facts by physical ranges, and what only `tm`
writes is refused from the socket; each refusal is counted by its reason in `ingest_dropped`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainmeter.runlog import plausible
from trainmeter.runlog.decode import Decoder

from ..conftest import read_events, run_dirs, run_tm

FORGER = r"""
import json, os, socket, time
path = os.environ["TRAINMETER_SOCKET"]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
pid = os.getpid()
def send(kind, d, src="agent", rank=0, t=None):
    rec = {"v": 1, "t": time.monotonic() if t is None else t, "src": src, "rank": rank,
           "pid": pid, "kind": kind, "d": d}
    s.sendto(json.dumps(rec).encode(), path)
send("hello", {"world_size": 1, "rank": 0, "local_rank": 0, "probes": ["steps"], "pid": pid})
send("step", {"k": 3, "tokens": 300, "n": 3})  # a true one, taken
for i in range(50):
    send("step", {"k": 999_999, "tokens": 10**12 - 1, "n": (i + 1) * 999_999})
for i in range(20):  # a made-up pid each: no budget bought per record
    rec = {"v": 1, "t": time.monotonic(), "src": "agent", "rank": 0, "pid": 10**6 + i,
           "kind": "step", "d": {"k": 900_000, "tokens": 1}}
    s.sendto(json.dumps(rec).encode(), path)
send("step", {"k": 1, "tokens": 1}, t=time.monotonic() + 50)  # from the future
send("phase", {"name": "checkpoint", "s": 1e9, "n": 1})
send("fact", {"key": "peak_flops", "value": 1e-20, "source": "declared"})
send("fact", {"key": "flops_per_token", "value": 1e40, "source": "detected"})
send("fact", {"key": "n_params", "value": 1e30, "source": "detected"})
send("fact", {"key": "ingest_dropped", "value": 0, "source": "detected"})
gpu = {"gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "gpu_util": 1.0}]}
send("sample.gpu", gpu, src="tm")
send("sample.gpu", gpu)
send("alert", {"kind": "x", "message": "forged"}, src="tm")
send("crash", {"native": True, "message": "forged"}, src="tm")
send("run.end", {"exit_status": 0})
send("memory", {"device": "cuda", "total_b": 10**30, "allocated_b": 10**29})
send("metric", {"key": "loss", "value": 1.5, "via": "emit"}, src="tm")
time.sleep(0.3)
"""

REFUSED = {
    "implausible step rate": 70,
    "implausible step": 1,  # the record from the future: after the run
    "implausible phase time": 1,
    "forged fact": 2,
    "implausible fact": 2,
    "forged sample.gpu": 2,
    "forged alert": 1,
    "forged crash": 1,
    "forged run.end": 1,
    "implausible memory": 1,
    "forged metric": 1,
}


@pytest.fixture(scope="module")
def forged_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("forged")
    (root / "forge.py").write_text(FORGER)
    out = run_tm(["--no-web", "forge.py"], root)
    assert out.returncode == 0, out.stderr[-2000:]
    return root, run_dirs(root)[-1]


def test_what_cannot_be_true_is_not_believed(forged_run) -> None:
    _, run_dir = forged_run
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["steps"] == 3 and summary["tokens_seen"] == 300
    assert "mfu" not in summary and "gpus" not in summary and "devices" not in summary
    parts = {p["name"]: p for p in summary["time"]["parts"]}
    assert parts["checkpoint"]["s"] is None  # no 10^9 s of checkpoints in a 1 s run
    assert not [f for f in summary.get("facts", {}) if f in ("n_params", "flops_per_token")]
    assert "memory" not in summary


def test_each_refusal_is_counted_by_its_reason(forged_run) -> None:
    _, run_dir = forged_run
    dropped = [e["d"] for e in read_events(run_dir)
               if e["kind"] == "fact" and e["d"]["key"] == "ingest_dropped"]
    assert dropped[-1]["reasons"] == REFUSED
    assert dropped[-1]["value"] == sum(REFUSED.values())


def test_the_replay_decides_as_the_live_run_did(forged_run) -> None:
    root, run_dir = forged_run
    out = run_tm(["summary", "--json", str(run_dir)], root)
    assert out.returncode == 0, out.stderr[-1000:]
    replayed = json.loads(out.stdout)
    assert replayed["log"]["skipped"] == 0
    assert replayed["steps"] == 3 and replayed["tokens_seen"] == 300


# ---- the bounds themselves, without a process ------------------------------------------------


def _step(t: float, k: int, tokens: int = 0, pid: int = 1, rank: int = 0) -> bytes:
    return json.dumps({"v": 1, "t": t, "src": "agent", "rank": rank, "pid": pid, "kind": "step",
                       "d": {"k": k, "tokens": tokens}}).encode()


def test_a_rank_may_do_what_the_time_since_the_start_allows_and_no_more() -> None:
    decoder = Decoder()
    decoder.t_start = 100.0
    rate = plausible.MAX_STEPS_PER_S
    # 8 s in, with a second's slack: 9 s of steps at the most
    assert len(decoder.many([_step(108.0, 9 * rate)])) == 1
    assert decoder.many([_step(108.0, 1)]) == []
    assert decoder.many([_step(109.0, rate)]) != []  # a second later, a second's more
    assert decoder.reasons == {"implausible step rate": 1}


def test_the_fast_path_and_the_slow_path_bound_alike() -> None:
    """A batch large enough for orjson takes the same records as one line at a time."""
    lines = [_step(100.0 + i / 10, 30_000) for i in range(64)]
    many, one = Decoder(), Decoder()
    many.t_start = one.t_start = 100.0
    taken_many = [line for line, _ in many.many(lines)]
    taken_one = [line for line in lines if one.many([line])]
    assert taken_many == taken_one and 0 < len(taken_many) < 64
    assert many.reasons == one.reasons


@pytest.mark.parametrize(
    ("record", "reason"),
    [
        ({"kind": "sample.host", "src": "agent", "d": {}}, "forged sample.host"),
        ({"kind": "fact", "src": "agent", "d": {"key": "dp", "value": 2, "source": "declared"}},
         "forged fact"),
        ({"kind": "fact", "src": "agent", "d": {"key": "observe_only", "value": "x",
                                               "source": "detected"}}, "forged fact"),
        ({"kind": "step", "src": "tm", "d": {"k": 1}}, "forged step"),
        ({"kind": "fact", "src": "agent", "d": {"key": "peak_flops", "value": 1.0,
                                               "source": "detected"}}, "implausible fact"),
        ({"kind": "hello", "src": "agent", "d": {"world_size": 10**12}}, "implausible hello"),
    ],
)
def test_what_only_tm_writes_is_refused_from_the_socket(record, reason) -> None:
    decoder = Decoder(from_socket=True)
    decoder.t_start = 0.0
    line = json.dumps({"v": 1, "t": 1.0, "rank": 0, "pid": 5, **record}).encode()
    assert decoder.many([line]) == []
    assert decoder.reasons == {reason: 1}
    if not reason.startswith("implausible"):
        assert len(Decoder().many([line])) == 1  # in tm's own log the same record is taken


# ---- the second pass's records (issue 29): each broke, each is bounded now ------------------


def _line(kind: str, d: dict, rank: int = 0, t: float = 2.0, pid: int = 5, src: str = "agent") -> bytes:
    return json.dumps({"v": 1, "t": t, "src": src, "rank": rank, "pid": pid, "kind": kind,
                       "d": d}).encode()


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (_line("step", {"k": 1, "tokens": 1}, rank=10**15), "implausible step"),
        (_line("comm", {"k": 1, "n": 1, "s": 1e9, "calls": 1}), "implausible comm wait"),
        (_line("memory", {"device": "cuda", "total_b": 2**40, "allocated_b": 2**49}),
         "implausible memory"),
        (_line("metric", {"key": "k" * 70_000, "value": 1.0, "via": "emit"}, src="emit"),
         "implausible metric"),
    ],
    ids=["rank", "comm", "memory", "key"],
)
def test_the_second_pass_records_are_refused(line: bytes, reason: str) -> None:
    for from_socket in (True, False):  # live and read back alike
        decoder = Decoder(from_socket=from_socket)
        decoder.t_start = 0.0
        assert decoder.many([line]) == [] and decoder.reasons == {reason: 1}


def test_a_flood_of_crashes_from_one_process_is_cut_and_counted() -> None:
    decoder = Decoder()
    decoder.t_start = 0.0
    lines = [_line("crash", {"type": "E", "message": "m", "thread": "t"}) for _ in range(300)]
    assert len(decoder.many(lines)) == plausible.MAX_CRASHES_PER_PROCESS
    assert decoder.reasons == {"implausible crash": 300 - plausible.MAX_CRASHES_PER_PROCESS}
