"""The sender thread's `step` line is a template filled with `%` (no JSON per tick): it must be
byte for byte the line `records.encode` makes of the same record."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from trainmeter import records
from trainmeter.agent.probes import step_totals
from trainmeter.payloads import STEP


@pytest.mark.parametrize("rank", [None, 0, 3])
def test_each_form_of_the_step_line_is_the_encoders(rank) -> None:
    sender = SimpleNamespace(rank=rank, pid=4242)
    t = 12345.678901234
    for numbers in [(t, 3, 1203, 6), (t, 1, 7, 2, 4096), (t, 2, 9, 4, 8192, 8000)]:
        line = step_totals._line(sender, len(numbers)) % numbers
        _, k, n, micro, *rest = numbers
        tokens = rest[0] if rest else None
        real = rest[1] if len(rest) > 1 else None
        d = STEP.build(k=k, n=n, micro=micro, tokens=tokens, real_tokens=real)
        want = records.make(STEP.name, d, t=t, src="agent", rank=rank, pid=4242)
        assert line == records.encode(want)
        assert records.decode(line) == want


def test_a_rank_learned_late_makes_a_new_line(monkeypatch) -> None:
    """`Sender.learn_rank`: the lines made before carried no rank; those after carry it."""
    sent: list[bytes] = []
    sender = SimpleNamespace(rank=None, pid=7, send_line=lambda line, kept: sent.append(line))
    monkeypatch.setattr(step_totals, "get_sender", lambda: sender)
    monkeypatch.setattr(step_totals, "_lines", {})
    state = step_totals.state
    monkeypatch.setattr(state, "hdr", bytearray(len(state.hdr)))
    monkeypatch.setattr(state, "sent", step_totals.Totals(0, 0, 0, 0, 0, 0.0))
    monkeypatch.setattr(state, "any_tokens", False)
    for n, rank in ((1, None), (2, 1)):
        sender.rank = rank
        step_totals._pack_totals(state.hdr, step_totals._TOTALS_AT, 0, 0, 0, n, 1.5 * n, n)
        step_totals.drain()
    got = [records.decode(line) for line in sent]
    assert [(r["rank"], r["d"]["n"], r["d"]["k"], r["t"]) for r in got] == [
        (None, 1, 1, 1.5), (1, 2, 1, 3.0)
    ]
