"""coilmq's own store, queue-manager and functional server tests, on our store.

The base classes come from coilmq's sdist, fetched at test time (tests/stomp/coilmq_suite.py);
each is subclassed here unchanged, with coilmq's ``store`` fixture replaced by a
:class:`store.stomp.StompQueueStore` on the file store, SQLite and PostgreSQL. Their
``queue_manager`` and ``server`` fixtures (coilmq's stock QueueManager and
ThreadedStompServer) are coilmq's own, imported from its conftest modules.
"""

from __future__ import annotations

import pytest

from store.stomp import StompQueueStore
from tests.stomp import coilmq_suite

_suite = coilmq_suite.load()

# coilmq's fixtures, used by its test classes below (pytest finds them in this module).
conn = _suite["queue_manager.conftest"].conn
queue_manager = _suite["queue_manager.conftest"].queue_manager
server = _suite["functional.conftest"].server
server_addr = _suite["functional.conftest"].server_addr
c1 = _suite["functional.conftest"].c1
c2 = _suite["functional.conftest"].c2
c3 = _suite["functional.conftest"].c3


@pytest.fixture
def store(queue_store: StompQueueStore) -> StompQueueStore:
    """coilmq's ``store`` fixture: our queue store on the back-end under test."""
    return queue_store


class TestCoilmqStoreSuite(_suite["store"].BaseQueueTests):  # type: ignore[misc]
    """coilmq's tests/store BaseQueueTests."""


class TestCoilmqQueueManagerSuite(_suite["queue_manager"].QueueManagerTests):  # type: ignore[misc]
    """coilmq's tests/queue_manager QueueManagerTests, its stock QueueManager on our store."""


class TestCoilmqServerSuite(  # type: ignore[misc]
    _suite["functional.test_memory"].TestServerWithDefaultClasses
):
    """coilmq's tests/functional server tests, its ThreadedStompServer on our store."""
