"""Starts the slow-rank test's plain torchruns as the session starts, once collection says the
test that reads them will run (see `test_slow_rank.plain`)."""

from __future__ import annotations

import pytest

from . import test_slow_rank


def pytest_collection_finish(session: pytest.Session) -> None:
    if any(item.path.name == "test_slow_rank.py" and "plain" in getattr(item, "fixturenames", ())
           for item in session.items):
        test_slow_rank.start_plain(session.config._tmp_path_factory)  # type: ignore[attr-defined]
