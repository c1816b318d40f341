"""Starts the corpus's runs as the session starts, once collection says a test of the corpus or
of the lifecycle jobs will run (see background.py)."""

from __future__ import annotations

import pytest

from . import background


def pytest_collection_finish(session: pytest.Session) -> None:
    background.start(session)


def pytest_sessionfinish(session: pytest.Session) -> None:
    background.stop()
