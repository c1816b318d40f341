"""`supervisor/descriptors.Reserve`: what it holds back it gives back, even when the limit cut
the holding short."""

from __future__ import annotations

import errno
import os

from trainmeter.supervisor import descriptors


def test_descriptors_opened_before_the_limit_are_held_and_given_back(monkeypatch) -> None:
    """The reserve was opened in one list comprehension: when the limit refused the fifth, the
    four already open were lost to it, held by tm for the whole run and never released."""
    real_open, opened = os.open, []

    def open_four(path, flags, *args, **kwargs):
        if len(opened) == 4:
            raise OSError(errno.EMFILE, "Too many open files")
        fd = real_open(path, flags, *args, **kwargs)
        opened.append(fd)
        return fd

    monkeypatch.setattr(descriptors.os, "open", open_four)
    reserve = descriptors.Reserve()
    reserve.hold(16)
    monkeypatch.undo()
    real_close, closed = os.close, []

    def close(fd):
        closed.append(fd)
        real_close(fd)

    monkeypatch.setattr(descriptors.os, "close", close)
    reserve.release()
    monkeypatch.undo()
    leaked = set(opened) - set(closed)
    for fd in leaked:
        os.close(fd)
    assert len(opened) == 4 and not leaked
