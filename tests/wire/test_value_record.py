"""One rule for what a named value becomes on the wire, used by the agent and by `tm`.

The agent ships a value from a per-key line template (for speed); `tm` rebuilds a value read from
a ring after the process died. Both must give the record `records.value_record` builds: these
tests compare them field for field, with keys that could confuse a template (`%`, quotes,
non-ASCII, a key that looks like a hole).
"""

from __future__ import annotations

import json

import pytest

from trainmeter import records
from trainmeter.agent import outbox


class _Sender:
    def __init__(self, rank: int | None, pid: int) -> None:
        self.rank, self.pid = rank, pid


KEYS = ["loss", "tokens_per_step", 'a"b%d%%r', "ünï/κ", "\x00v", "\x00t"]


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("via", ["emit", "wandb"])
@pytest.mark.parametrize("rank", [None, 3])
def test_the_agents_template_is_the_value_record(key: str, via: str, rank: int | None) -> None:
    sender = _Sender(rank, 4242)
    is_fact = via == "emit" and key in records.FACT_KEYS
    plain = outbox.template(sender, via, key) % (12.5, 0.25, 7)
    assert json.loads(plain) == records.value_record(
        key, 0.25, via, t=12.5, rank=rank, pid=4242, q=7
    )
    if not is_fact:  # a fact never carries a step (the sender uses the plain form for it)
        stepped = outbox.template(sender, via, key, stepped=True) % (12.5, 0.25, 99, 7)
        assert json.loads(stepped) == records.value_record(
            key, 0.25, via, 99, t=12.5, rank=rank, pid=4242, q=7
        )
        assert records.decode(stepped)["d"]["step"] == 99


def test_a_value_record_by_hand() -> None:
    """The rule, written out: emit's fact keys are facts, everything else a metric with its
    `via`; `src` is `emit` for emit and `agent` for a tap; `recovered` and `q` when given."""
    assert records.value_record("tokens_per_step", 4096, "emit", 5, t=1.0, pid=9) == {
        "v": 1, "t": 1.0, "src": "emit", "rank": None, "pid": 9, "kind": "fact",
        "d": {"key": "tokens_per_step", "value": 4096, "source": "emitted"},
    }
    assert records.value_record("tokens_per_step", 1.0, "wandb", 5, t=2.0, rank=1, pid=9, q=3) == {
        "v": 1, "t": 2.0, "src": "agent", "rank": 1, "pid": 9, "kind": "metric",
        "d": {"key": "tokens_per_step", "value": 1.0, "via": "wandb", "step": 5}, "q": 3,
    }
    rec = records.value_record("loss", 0.5, "emit", None, t=3.0, q=8, recovered=True)
    assert rec["d"] == {"key": "loss", "value": 0.5, "via": "emit", "recovered": True}
    assert rec["src"] == "emit" and rec["q"] == 8
