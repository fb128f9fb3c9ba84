"""Fixtures of the STOMP broker tests: the back-ends they run on and an opened queue store.

``stomp_backend`` is parametrised over the file store (NIO), SQLite and PostgreSQL (issue
29), narrowed by ``--backends`` like the contract suite; ``stomp_factory`` is a
:class:`tests.support.backends.StoreFactory` for it (its ``config``, cleaned up at teardown);
``queue_store`` an opened, loaded :class:`store.stomp.StompQueueStore` on it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from store.stomp import StompQueueStore, open_queue_store
from tests.conftest import selected_backends
from tests.support.backends import BackendSpec, StoreFactory, unique_prefix

STOMP_BACKENDS = ("file-nio", "sqlite", "postgresql")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "stomp_backend" in metafunc.fixturenames:
        specs = [s for s in selected_backends(metafunc.config) if s.name in STOMP_BACKENDS]
        metafunc.parametrize("stomp_backend", specs, ids=[s.name for s in specs], indirect=True)


@pytest.fixture
def stomp_backend(request: pytest.FixtureRequest) -> BackendSpec:
    """The back-end under test."""
    spec: BackendSpec = request.param
    return spec


@pytest.fixture
def stomp_factory(stomp_backend: BackendSpec, tmp_path: Path) -> Iterator[StoreFactory]:
    """A StoreFactory for ``stomp_backend`` (its ``config``); cleans up at teardown."""
    factory = StoreFactory(stomp_backend, tmp_path, unique_prefix())
    try:
        yield factory
    finally:
        factory.teardown()


@pytest.fixture
def queue_store(stomp_factory: StoreFactory) -> Iterator[StompQueueStore]:
    """An opened, loaded queue store on the back-end under test; closed at teardown."""
    qs = open_queue_store(stomp_factory.config)
    try:
        yield qs
    finally:
        qs.close()
