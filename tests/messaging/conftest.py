"""Fixtures of the storage-manager tests: the back-ends they run on, and a store factory.

``messaging_backend`` is parametrised over the file store (NIO: the journal types write the
same records, so one is enough here), PostgreSQL and SQLite, and MariaDB too in a soak
(``STORE_TEST_PROFILE=soak``: :mod:`tests.support.profile` says why CI leaves it to the
contract suites), narrowed by ``--backends`` like the contract suite; ``messaging_factory`` is a
:class:`tests.support.backends.StoreFactory` for it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import selected_backends
from tests.support import profile
from tests.support.backends import BackendSpec, StoreFactory, unique_prefix

MESSAGING_BACKENDS = ("file-nio", "postgresql", "sqlite") + (
    ("mariadb",) if profile.full_matrix() else ()
)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "messaging_backend" in metafunc.fixturenames:
        specs = [s for s in selected_backends(metafunc.config) if s.name in MESSAGING_BACKENDS]
        metafunc.parametrize("messaging_backend", specs, ids=[s.name for s in specs], indirect=True)


@pytest.fixture
def messaging_backend(request: pytest.FixtureRequest) -> BackendSpec:
    """The back-end under test."""
    spec: BackendSpec = request.param
    return spec


@pytest.fixture
def messaging_factory(messaging_backend: BackendSpec, tmp_path: Path) -> Iterator[StoreFactory]:
    """A StoreFactory for ``messaging_backend``; closes and cleans up at teardown."""
    factory = StoreFactory(messaging_backend, tmp_path, unique_prefix())
    try:
        yield factory
    finally:
        factory.teardown()
