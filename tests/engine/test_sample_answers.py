"""A sample's finiteness check leaves out the values of the parts that answered for their floats
(`Engine.sample`: the pace, FLOPs per token, the host, the time split, MFU, the GPU counters).
Each answer must be right: here each of those parts is made to give an infinity, and the sample
must still be the snapshot's (the infinity taken out, as `finite_only` takes it out), for the
history's keys and for every key."""

from __future__ import annotations

from typing import Any

import pytest

from trainmeter.views.history import History

from . import build as b

SHAPE = {"n_params": 124_000_000, "n_embedding_params": 38_000_000, "n_layers": 12,
         "d_model": 768, "seq_len": 1024}


def _run(
    tokens: float = 8192.0, n_params: float = 124e6, rss_kb: float = 1e5
) -> list[dict[str, Any]]:
    records = [b.start(0.0), b.hello(0.5, probes=("steps", "tokens", "dataloader"))]
    records += [b.fact(0.7, k, v) for k, v in {**SHAPE, "n_params": n_params}.items()]
    records += [b.step(1.0 + i, tokens=tokens, n=i) for i in range(1, 8)]
    records += [b.rec("sample.host", 7.0, rank=None, src="tm", procs=1, cpu_s=1.0, rss_kb=rss_kb)]
    return records


CASES = {
    "the tokens seen and tokens/s overflow": (_run(tokens=1e308), "tokens_seen"),
    "FLOPs per token overflows": (_run(n_params=1e308), "flops_per_token"),
    "the host's resident bytes overflow": (_run(rss_kb=1e306), "host"),
}


def _fed(records: list[dict[str, Any]]) -> Any:
    engine = b.Engine()
    for record in records:
        engine.feed(record)
    return engine


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_part_that_gives_an_infinity_is_the_snapshots(name: str) -> None:
    """Each sample from an engine of its own: a snapshot first would take the infinity out of
    an entry both share (FLOPs per token, kept per version of the facts) before the sample."""
    records, key = CASES[name]
    snap = _fed(records).snapshot(now=9.0)
    assert any(path.startswith(key) for path in snap["absent"]), snap["absent"]  # it overflowed
    for keys in (History.reads, None):
        sample = _fed(records).sample(now=9.0, keys=keys)
        assert key in sample
        for k, value in sample.items():
            assert snap[k] == value, (name, k)
