import pytest

from tests.socket_collector import SocketCollector


@pytest.fixture
def collector():
    c = SocketCollector()
    yield c
    c.close()
