"""coilmq's own store, queue-manager and functional server tests, on our store.

The base classes come from coilmq's sdist, fetched at test time (tests/stomp/coilmq_suite.py);
each is subclassed here unchanged, with coilmq's ``store`` fixture replaced by a
:class:`store.stomp.StompQueueStore` on the file store, SQLite and PostgreSQL. Their
``queue_manager`` and ``server`` fixtures (coilmq's stock QueueManager and
ThreadedStompServer) are coilmq's own, imported from its conftest modules, except that the
``server`` fixture is coilmq's with one change: its thread serves with a 50 ms poll interval
instead of socketserver's 0.5 s, which every test's teardown waited out in ``shutdown()``
(0.5 s x 100 tests); what is served, and how, is the same.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from store.stomp import StompQueueStore
from tests.stomp import coilmq_suite

_suite = coilmq_suite.load()

# coilmq's fixtures, used by its test classes below (pytest finds them in this module).
conn = _suite["queue_manager.conftest"].conn
queue_manager = _suite["queue_manager.conftest"].queue_manager
server_addr = _suite["functional.conftest"].server_addr
c1 = _suite["functional.conftest"].c1
c2 = _suite["functional.conftest"].c2
c3 = _suite["functional.conftest"].c3


@pytest.fixture
def store(queue_store: StompQueueStore) -> StompQueueStore:
    """coilmq's ``store`` fixture: our queue store on the back-end under test."""
    return queue_store


@pytest.fixture
def server(request: pytest.FixtureRequest, store: StompQueueStore) -> Iterator[Any]:
    """coilmq's ``server`` fixture (tests/functional/conftest.py) with a 50 ms poll interval:
    its ThreadedStompServer on a free port with its stock QueueManager and schedulers on
    ``store``; ``request.param`` is the authenticator when a test passes one."""
    from coilmq.queue import QueueManager
    from coilmq.scheduler import FavorReliableSubscriberScheduler, RandomQueueScheduler
    from coilmq.server.socket_server import ThreadedStompServer
    from coilmq.topic import TopicManager

    made = ThreadedStompServer(
        ("127.0.0.1", 0),
        authenticator=getattr(request, "param", None),
        queue_manager=QueueManager(
            store, FavorReliableSubscriberScheduler(), RandomQueueScheduler()
        ),
        topic_manager=TopicManager(),
    )
    thread = threading.Thread(target=made.serve_forever, args=(0.05,), name="server")
    thread.start()
    try:
        yield made
    finally:
        made.shutdown()
        thread.join()
        made.server_close()


class TestCoilmqStoreSuite(_suite["store"].BaseQueueTests):  # type: ignore[misc]
    """coilmq's tests/store BaseQueueTests."""


class TestCoilmqQueueManagerSuite(_suite["queue_manager"].QueueManagerTests):  # type: ignore[misc]
    """coilmq's tests/queue_manager QueueManagerTests, its stock QueueManager on our store."""


class TestCoilmqServerSuite(  # type: ignore[misc]
    _suite["functional.test_memory"].TestServerWithDefaultClasses
):
    """coilmq's tests/functional server tests, its ThreadedStompServer on our store."""
