"""Starts test_deaths' hung run as soon as collection says its test will run (see hung.py)."""

from __future__ import annotations

import pytest

from . import hung


def pytest_collection_finish(session: pytest.Session) -> None:
    if hung.selected(session.items):
        hung.started()


def pytest_sessionfinish(session: pytest.Session) -> None:
    while hung.STARTED:
        hung.STARTED.pop().close()
