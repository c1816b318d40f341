import pytest

from .collector import Collector


@pytest.fixture
def collector():
    c = Collector()
    yield c
    c.close()
