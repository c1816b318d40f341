"""`Plain`, which stands in for a mutable dataclass on the start-up paths: equal by attributes
to its own class only, unhashable, shown as its class and attributes."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainmeter.exporters.httpd import Request, Response
from trainmeter.plain import Plain
from trainmeter.runlog.replay import ReplayResult
from trainmeter.runlog.runs import RunInfo


class _Point(Plain):
    def __init__(self, x: int, y: int) -> None:
        self.x = x
        self.y = y


class _Other(Plain):
    def __init__(self, x: int, y: int) -> None:
        self.x = x
        self.y = y


def test_equal_by_attributes_within_one_class_only() -> None:
    assert _Point(1, 2) == _Point(1, 2)
    assert _Point(1, 2) != _Point(1, 3)
    assert _Point(1, 2) != _Other(1, 2)  # same attributes, another class: as a dataclass
    assert _Point(1, 2).__eq__((1, 2)) is NotImplemented


def test_unhashable_and_shown_by_its_attributes_in_order() -> None:
    with pytest.raises(TypeError):
        hash(_Point(1, 2))
    assert repr(_Point(1, "a")) == "_Point(x=1, y='a')"


def test_the_classes_that_use_it_keep_the_dataclass_behaviour() -> None:
    assert ReplayResult(snapshot={"steps": 3}) == ReplayResult(snapshot={"steps": 3})
    assert ReplayResult(snapshot={"steps": 3}) != ReplayResult(snapshot={"steps": 4})
    assert repr(Request("GET", "/x", "HTTP/1.1", {})) == (
        "Request(method='GET', target='/x', version='HTTP/1.1', headers={})"
    )
    assert Response(200, b"ok") == Response(200, b"ok") != Response(404, b"ok")
    run = RunInfo(Path("/runs/a"), "a", {"steps": 1})
    assert "snapshot" not in repr(run) and repr(run).startswith("RunInfo(path=PosixPath('/runs/a'), name='a'")
    assert run != RunInfo(Path("/runs/a"), "a", {"steps": 2})  # the snapshot still counts
